"""Fuzzing with hypothesis: no TOML file and no command line may produce a traceback."""

import copy
import tomllib
from pathlib import Path

import pytest
import tomli_w
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from generator import cli
from generator.report.article import build_context
from generator.store.codec import load_file, parse
from generator.store.layout import row_files as result_files
from generator.store.records import ResultsError, RowResult

pytestmark = pytest.mark.slow  # hypothesis fuzzes the loader and the command line: hundreds of examples

REPO = Path(__file__).resolve().parent.parent
VALID_FILE = sorted(REPO.glob("measurements/*/*/train-b8-s256.toml"))[-1]
VALID = tomllib.loads(VALID_FILE.read_text())
PATH = Path("fuzz/train-b8-s256.toml")

scalars = st.one_of(st.integers(min_value=-(2**63), max_value=2**63 - 1), st.floats(allow_nan=False),
                    st.text(max_size=20), st.booleans())
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(
    st.text(min_size=1, max_size=10), inner, max_size=4), max_leaves=12)


def _parse_or_refuse(text: str) -> None:
    try:
        assert isinstance(parse(text, PATH), RowResult)
    except ResultsError as error:
        assert str(error).startswith(str(PATH))


@given(st.dictionaries(st.text(min_size=1, max_size=15), values, max_size=8))
@settings(max_examples=300, deadline=None)
def test_any_toml_document_loads_or_is_refused(document: dict) -> None:
    _parse_or_refuse(tomli_w.dumps(document))


def _paths(document: dict, prefix: tuple = ()) -> list[tuple]:
    found = []
    for key, value in document.items():
        found.append((*prefix, key))
        if isinstance(value, dict):
            found.extend(_paths(value, (*prefix, key)))
        elif isinstance(value, list):
            found.extend(_paths(dict(enumerate(value)), (*prefix, key)) if value else [])
    return found


ALL_PATHS = _paths(VALID)


@given(st.lists(st.tuples(st.sampled_from(ALL_PATHS), st.one_of(st.none(), values)), min_size=1, max_size=4))
@settings(max_examples=400, deadline=None)
def test_damaged_result_files_load_or_are_refused(edits: list) -> None:
    document = copy.deepcopy(VALID)
    for path, value in edits:
        parent = document
        try:
            for key in path[:-1]:
                parent = parent[key]
            if isinstance(parent, dict) and not isinstance(path[-1], str):
                continue  # a list an earlier edit replaced with a table: a TOML table has no number keys
            if value is None:
                del parent[path[-1]]
            else:
                parent[path[-1]] = value
        except (KeyError, IndexError, TypeError):
            continue  # an earlier edit removed or replaced this path
    _parse_or_refuse(tomli_w.dumps(document))


def _get(document, path: tuple):
    for key in path:
        document = document[key]
    return document


LEAF_PATHS = [path for path in ALL_PATHS if not isinstance(_get(VALID, path), dict | list)]
COMMITTED_ROWS = [load_file(path) for path in result_files(VALID_FILE.parent) if path.name != VALID_FILE.name]


def _same_type(value: object) -> st.SearchStrategy:
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.integers(min_value=-(2**63), max_value=2**63 - 1) | st.integers(0, 10)
    if isinstance(value, float):
        return st.floats(allow_nan=False)
    return st.text(max_size=12) | st.sampled_from(["ok", "oom", "train", "inference", "baseline", "float16", ""])


@st.composite
def typed_edit(draw: st.DrawFn) -> tuple[tuple, object]:
    path = draw(st.sampled_from(LEAF_PATHS))
    return path, draw(_same_type(_get(VALID, path)))


@given(st.lists(typed_edit(), min_size=1, max_size=3))
@settings(max_examples=500, deadline=None)
def test_plausible_but_wrong_values_load_or_are_refused_and_the_page_still_builds(edits: list) -> None:
    """Same-typed edits (a string for a string): an unknown dtype, a zero peak, a negative count."""
    document = copy.deepcopy(VALID)
    for path, value in edits:
        _get(document, path[:-1])[path[-1]] = value
    try:
        result = parse(tomli_w.dumps(document), VALID_FILE)
    except ResultsError:
        return
    context = build_context([result, *COMMITTED_ROWS])
    # What loads is published as it is, and it is plausible: the edited row's net peak is its file's, and no
    # process or net peak on the page is above the memory its machine recorded (or over 1 PiB where none is).
    shown = {view.id: view for view in context.rows}
    if result.row.id in shown and result.summary.ok and result.row.mode != "baseline":
        assert shown[result.row.id].net.n_bytes == result.summary.net_peak_bytes  # type: ignore[union-attr]
    limits = {r.row.id: r.environment.total_memory_bytes or 1024**5 for r in (result, *COMMITTED_ROWS)}
    for view in context.rows:
        for figure in (view.net, view.peak):
            assert figure is None or figure.n_bytes <= limits[view.id], (view.id, figure)


@given(st.text(max_size=300))
@settings(max_examples=200, deadline=None)
def test_arbitrary_text_is_refused(text: str) -> None:
    _parse_or_refuse(text)


WORDS = ["measure", "build", "probe", "--rows", "--model", "--seq", "--device", "--repeats", "--force",
         "--timeout", "--memory-limit", "--output", "--measurements", "--env", "--row", "train-b8", "infer-b1",
         "baseline", "train-b8-ckpt-bf16-lora4", "0", "-1", "8", "1e9", "3GiB", "cpu", "cuda", "nan", "",
         "tests/tiny-llama.json", "no/such.json", "org/model", "diff", "predict", "--format", "json", "md",
         "--threshold", "2%", "--record", "gpt2", "Llama-2-7b", "fit", "--budget", "24GiB", "--margin", "10%",
         "--confirm", "refresh", "--lora-targets", "q_proj", "--executor", "local", "slurm", "--slurm-time"]


def _snapshot(root: Path) -> dict[str, float]:
    """Every file under measurements/ and site/, with its modification time."""
    return {str(path): path.stat().st_mtime for folder in ("measurements", "site")
            for path in (root / folder).rglob("*") if path.is_file()}


@pytest.fixture
def no_side_effects(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Valid command lines parse and validate for real, then stop before running workers or writing a site."""
    from generator.measure import matrix_run, probe
    from generator.measure.matrix_run import MatrixReport
    from generator.predict import rows
    from generator.report import site

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("HF_ENDPOINT", "https://hub.invalid")
    monkeypatch.setattr(matrix_run, "run_matrix", lambda request, display: MatrixReport(folder=tmp_path))
    monkeypatch.setattr(site, "build_site", lambda measurements, output, env=None, model=None, force=False: [])
    monkeypatch.setattr(rows, "predict_rows", lambda rows, source, model, workers=1: [])
    monkeypatch.setattr(probe, "collect_environment", lambda device: type("E", (), {"id": "fuzz"})())
    from generator.answers.fit import FitAnswer
    from generator.cli import confirm, refresh
    from generator.measure import cluster_run
    from generator.predict import curves, fit
    from generator.store import fit_table

    answer = FitAnswer(kind="inference", row="infer-b1-s256", batch=1, predicted_bytes=1,
                                 next_bytes=2, usable_bytes=1, simulations=0)
    monkeypatch.setattr(fit, "fit", lambda predictor, seq, budget, margin, **_: [answer])
    monkeypatch.setattr(confirm, "confirm", lambda answers, source, measurements: "")
    monkeypatch.setattr(curves, "site_curves", lambda environment, **_: None)
    monkeypatch.setattr(fit_table, "save_fit", lambda table, folder: folder / "_fit.toml")
    monkeypatch.setattr(refresh, "refresh", lambda source, measurements, seq: refresh.RefreshReport())
    monkeypatch.setattr(cluster_run, "run_cluster_matrix",
                        lambda request, display, options: MatrixReport(folder=tmp_path))


@given(argv=st.lists(st.one_of(st.sampled_from(WORDS), st.text(max_size=12)), max_size=8))
@example(argv=["predict"])  # the stubs once lagged behind predict_rows' and fit's arguments: a TypeError
@example(argv=["fit", "--budget", "24GiB"])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_no_command_line_raises(no_side_effects: None, argv: list[str], capsys: pytest.CaptureFixture) -> None:
    before = _snapshot(REPO)
    code = cli.main(argv)
    assert _snapshot(REPO) == before, argv  # nothing written into the repository under test
    captured = capsys.readouterr()
    assert code in (0, 1, 2, 130)
    assert "Traceback" not in captured.err
    if code == 2:
        assert len(captured.err.strip().splitlines()) == 1, captured.err
