"""diff: real tiny-config runs, edited copies, old files, bad input."""

import json
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w
from conftest import TINY_MODEL, grow, run_cli

from generator.diff.compare import NothingComparedError, compare, parse_threshold
from generator.store.catalog import Catalog
from generator.store.records import METHOD_VERSION

ROWS = ("infer-b8", "train-b1", "train-b8", "train-b8-ckpt")


def _environment(root: Path) -> Path:
    (folder,) = [p for p in root.iterdir() if p.is_dir()]
    return folder


def _rows(root: Path) -> Path:
    (folder,) = [p for p in _environment(root).iterdir() if p.is_dir()]
    return folder


def _edit(path: Path, change) -> None:
    document = tomllib.loads(path.read_text())
    change(document)
    path.write_text(tomli_w.dumps(document))


def diff(before: Path, after: Path, *extra: str):
    return run_cli("diff", str(before), str(after), *extra)


REPO = Path(__file__).resolve().parent.parent


@pytest.fixture
def real_twin(tmp_path: Path) -> tuple[Path, Path]:
    """Two copies of the committed environment with the newest library versions: real SmolLM2 rows."""
    from generator.store.catalog import newest
    from generator.store.layout import environments

    catalog = Catalog(REPO / "measurements")
    article = newest([catalog.select(folder, None) for folder in environments(catalog.root)])
    environment = article.folder if article.folder.name == article.environment else article.folder.parent
    before, after = tmp_path / "before" / environment.name, tmp_path / "after" / environment.name
    shutil.copytree(environment, before)
    shutil.copytree(environment, after)
    return before, after


@pytest.fixture
def twin(measured_root: Path, tmp_path: Path) -> tuple[Path, Path]:
    """The measured environment and a copy of it under another root, to edit."""
    copy = tmp_path / "after"
    shutil.copytree(measured_root, copy)
    return _environment(measured_root), _environment(copy)


@pytest.mark.slow  # simulates every architecture, or measures twice
def test_two_separate_runs_of_one_environment_diff_as_same(tmp_path: Path) -> None:
    roots = [tmp_path / "one", tmp_path / "two"]
    for root in roots:  # two measure runs: two worker servers per run, nothing shared between runs
        result = run_cli("measure", "--model", str(TINY_MODEL), "--repeats", "2", "--rows", *ROWS,
                         "--output", str(root))
        assert result.returncode == 0, result.stderr
    result = diff(_environment(roots[0]), _environment(roots[1]), "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    document = json.loads(result.stdout)
    assert [row["verdict"] for row in document["rows"]] == ["same"] * len(ROWS), result.stdout
    assert all(row["after"]["repeats"] == 2 for row in document["rows"])


def test_a_ten_percent_rise_is_more_and_fails_the_gate(real_twin: tuple[Path, Path]) -> None:
    before, after = real_twin
    next(after.rglob("train-b8-s256-glibc-tuned.toml")).unlink()  # else the row is judged on its tuned twin
    path = next(after.rglob("train-b8-s256.toml"))
    _edit(path, lambda d: grow(d, 1.10))
    result = diff(before, after)
    assert result.returncode == 1, result.stdout + result.stderr
    line = next(line for line in result.stdout.splitlines() if "train-b8-s256 " in line)
    assert "more" in line and "+10.0 %" in line
    assert "1 row(s) got worse: train-b8-s256" in result.stdout


def test_a_tenth_of_a_percent_is_same(real_twin: tuple[Path, Path]) -> None:
    before, after = real_twin
    path = next(after.rglob("train-b8-s256.toml"))
    _edit(path, lambda d: grow(d, 1.001))
    result = diff(before, after, "--format", "json")
    assert result.returncode == 0, result.stdout + result.stderr
    row = next(r for r in json.loads(result.stdout)["rows"] if r["row"] == "train-b8-s256")
    # the threshold, by hand: the wider of 5 % and each side's (max − min) / median of its repeats
    sides = [tomllib.loads(next(side.rglob("train-b8-s256.toml")).read_text())["result"] for side in real_twin]
    spreads = [(s["net_peak_max_bytes"] - s["net_peak_min_bytes"]) / s["net_peak_bytes"] for s in sides]
    assert row["verdict"] == "same" and row["threshold"] == pytest.approx(max(0.05, *spreads))
    _edit(path, lambda d: grow(d, 1.12))
    moved = next(r for r in json.loads(diff(before, after, "--format", "json").stdout)["rows"]
                 if r["row"] == "train-b8-s256")
    assert moved["verdict"] == "more" and moved["change"] > 0 and moved["change_bytes"] > 0


def test_threshold_override(real_twin: tuple[Path, Path]) -> None:
    before, after = real_twin
    next(after.rglob("train-b8-s256-glibc-tuned.toml")).unlink()
    path = next(after.rglob("train-b8-s256.toml"))
    _edit(path, lambda d: grow(d, 1.03))
    assert diff(before, after).returncode == 0
    result = diff(before, after, "--threshold", "2%", "--format", "md")
    assert result.returncode == 1
    assert "| `train-b8-s256` |" in result.stdout and "2.0 % (--threshold)" in result.stdout


def test_rows_on_one_side_only(twin: tuple[Path, Path]) -> None:
    before, after = twin
    next(after.glob("*/train-b4-s512.toml")).unlink()
    result = diff(before, after, "--format", "json")
    assert result.returncode == 0
    verdicts = {row["row"]: row["verdict"] for row in json.loads(result.stdout)["rows"]}
    assert verdicts["train-b4-s512"] == "only before"
    assert diff(after, before, "--format", "json").stdout.count('"only after"') == 1


def test_other_config_or_method_is_not_comparable(twin: tuple[Path, Path]) -> None:
    before, after = twin
    rows = _rows(after.parent)
    _edit(rows / "train-b2-s256.toml", lambda d: d.update(method_version=1))
    document = json.loads(diff(before, after, "--format", "json").stdout)
    reasons = {row["row"]: (row["verdict"], row["reason"]) for row in document["rows"]}
    assert reasons["train-b2-s256"] == ("not comparable", f"method_version differs ({METHOD_VERSION} against 1)")
    assert reasons["train-b1-s256"] == ("same", "")
    for path in rows.glob("[!_]*.toml"):  # the same name, another architecture: every row of the model
        _edit(path, lambda d: d["model"].update(config_sha256="f" * 64))
    refused = diff(before, after, "--format", "json")  # nothing compared: a gate must not pass
    assert refused.returncode == 2 and refused.stdout == "", refused.stdout
    assert "nothing was checked" in refused.stderr and "model.config_sha256 differs" in refused.stderr


def test_a_different_cpu_is_said_above_the_table(twin: tuple[Path, Path]) -> None:
    before, after = twin
    for path in after.rglob("*.toml"):
        if not path.name.startswith("_"):
            _edit(path, lambda d: d["environment"].update(cpu="Another CPU 9000", cpu_count=64))
    cores = tomllib.loads(next(before.rglob("train-b8-s256.toml")).read_text())["environment"]["cpu_count"]
    output = diff(before, after).stdout
    header, table = output.split("┏", 1)
    assert "these set-ups also differ in more than library versions" in header
    assert "cpu:" in header and "→ Another CPU 9000" in header and f"cpu_count: {cores} → 64" in header
    assert "Another CPU" not in table


def test_a_failed_row_after_fails_the_gate(twin: tuple[Path, Path]) -> None:
    before, after = twin
    _edit(next(after.glob("*/train-b8-s256.toml")), lambda d: d["result"].update(status="oom", phase="step2"))
    result = diff(before, after, "--format", "json")
    assert result.returncode == 1 and json.loads(result.stdout)["worse"] == ["train-b8-s256"]


@pytest.mark.parametrize(("damage", "message"), [
    (lambda path: path.write_text("schema_version = 1\n[row\n"), "not valid TOML"),
    (lambda path: _edit(path, lambda d: d.update(schema_version=99)), "schema version 99 is newer"),
])
def test_bad_files_are_one_line_naming_the_file(twin: tuple[Path, Path], damage, message: str) -> None:
    before, after = twin
    path = next(after.glob("*/train-b8-s256.toml"))
    damage(path)
    result = diff(before, after)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and str(path) in lines[0] and message in lines[0]


def test_unknown_environment_is_refused(measured_root: Path) -> None:
    result = run_cli("diff", "cpu-nowhere", "cpu-elsewhere", "--measurements", str(measured_root))
    assert result.returncode == 2 and "no environment 'cpu-nowhere'" in result.stderr


def test_old_files_without_the_new_keys_load_and_diff(twin: tuple[Path, Path], tmp_path: Path) -> None:
    """Files written before method versions, RSS splits, spreads and model folders (rows in the environment)."""
    before, _ = twin
    legacy = tmp_path / "legacy" / before.name
    legacy.mkdir(parents=True)
    for path in _rows(before.parent).glob("[!_]*.toml"):
        document = tomllib.loads(path.read_text())
        document.pop("method_version")
        document.pop("method_hash")
        document["schema_version"] = 1  # files without a method version were written by schema 1
        for table in (document["result"], *document["repeats"]):
            for key in ("phase_rss_anon_bytes", "phase_rss_file_bytes", "net_peak_min_bytes", "net_peak_max_bytes",
                        "repeats_note"):
                table.pop(key, None)
        (legacy / path.name).write_text(tomli_w.dumps(document))
    old = Catalog(legacy.parent).select(legacy, None)
    assert {result.method_version for result in old.results} == {1}
    same = compare(old, old)
    assert {row.verdict for row in same.rows} == {"same"}
    with pytest.raises(NothingComparedError, match=rf"method_version differs \(1 against {METHOD_VERSION}\)"):
        compare(old, Catalog(before.parent).select(before, None))  # every row: not comparable, so nothing checked


def test_threshold_parsing() -> None:
    assert parse_threshold("2%") == 0.02 and parse_threshold(" 0.5 % ") == 0.005
    for text in ("2", "lots", "-1%", "%"):
        with pytest.raises(ValueError):
            parse_threshold(text)


def test_a_row_with_a_tuned_twin_is_judged_on_the_twin(real_twin: tuple[Path, Path]) -> None:
    before, after = real_twin
    path = next(after.rglob("train-b8-s256.toml"))
    _edit(path, lambda d: grow(d, 1.10))
    result = diff(before, after, "--format", "json")
    assert result.returncode == 0, result.stdout  # the twin did not move: an allocator effect, not a regression
    rows = {row["row"]: row for row in json.loads(result.stdout)["rows"]}
    assert rows["train-b8-s256"]["verdict"] == "more"
    assert rows["train-b8-s256"]["judged_on"] == "train-b8-s256-glibc-tuned"
    twin = next(after.rglob("train-b8-s256-glibc-tuned.toml"))
    _edit(twin, lambda d: grow(d, 1.01))
    assert diff(before, after).returncode == 1  # +1 % under the tuned allocator is past its floor
