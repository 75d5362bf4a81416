"""The main job on a machine the repository has never seen: measure, refresh, build, and the page has every
page and section the committed environment's has (issue: the main job refreshes the whole write-up)."""

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import TINY_MODEL

pytestmark = pytest.mark.slow  # runs the main job's steps

REPO = Path(__file__).resolve().parent.parent
NEW_MACHINE = "cpu-torch0-transformers0-peft0-py3.11-newbox"


def headings(markdown: str) -> list[str]:
    return [line for line in markdown.splitlines() if re.match(r"^#{1,2} ", line)]


def _section_names(markdown: str) -> list[str]:
    """The article's section headings, without the model's name in the title."""
    return [heading for heading in headings(markdown) if not heading.startswith("# ")]


@pytest.fixture(scope="module")
def main_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """measure + refresh, as `nox -s measure` runs them, under an environment id no committed folder has; once
    for the module (the two tests only read what it wrote, and a second refresh writes nothing)."""
    with pytest.MonkeyPatch.context() as monkeypatch:
        yield _measure_and_refresh(tmp_path_factory.mktemp("main-job"), monkeypatch)


def _measure_and_refresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    from generator.cli import refresh
    from generator.matrix import default_matrix
    from generator.measure import environment
    from generator.measure.matrix_run import MeasureRequest, measure_rows
    from generator.model_source import resolve_model
    from generator.predict import curves

    measurements = tmp_path / "measurements"
    shutil.copytree(REPO / "measurements", measurements)
    monkeypatch.setattr(environment, "environment_id", lambda fields: NEW_MACHINE)
    monkeypatch.setattr(curves, "SHIPPED_MODELS", {"tiny-llama": "tiny"})
    monkeypatch.setattr(curves, "resolve_model", lambda name: resolve_model(str(TINY_MODEL)))
    monkeypatch.setattr(curves, "SITE_SEQ_LEN", 64)
    # two of the sharded set-ups stand for all of them: each curve is a dozen simulations
    monkeypatch.setattr(curves, "SHARDED_SETUPS", curves.SHARDED_SETUPS[:1] + curves.SHARDED_SETUPS[-1:])
    monkeypatch.setattr(curves, "EXAMPLE_ROWS", (("run it", "infer-b1-s64-bf16"),
                                                 ("train all of it", "train-b2-s64-bf16")))
    source = resolve_model(str(TINY_MODEL))
    report = measure_rows(MeasureRequest(rows=tuple(default_matrix()), model=source, output=measurements,
                                         repeats=1, repeats_explicit=True))
    assert not report.failed and report.estimate_seconds > 0
    done = refresh.refresh(source, measurements, 256)
    assert set(done.seconds) == {"predict", "probe", "fit"}, done.notes
    return measurements


def test_a_new_machine_gets_every_page_and_section(main_job: Path, tmp_path: Path) -> None:
    from generator.report.site import build_pages

    committed = build_pages(REPO / "measurements")
    fresh = build_pages(main_job)
    assert NEW_MACHINE in fresh["index.md"]  # the article is this machine's
    assert {name for name in fresh if not name.endswith(".svg")} == {
        name for name in committed if not name.endswith(".svg")}
    # the allocator comparison is its own nox session (`nox -s allocators`), not part of the main job
    assert _section_names(fresh["index.md"]) == [name for name in _section_names(committed["index.md"])
                                                 if name != "## The allocator"]
    article = fresh["index.md"]
    assert "| Predicted net |" in article and "No row of this environment carries a prediction" not in article
    assert "No row of this environment ran under a cap" not in article and "ran under a cap of" in article
    assert "No simulated rows of the example" not in article and "Needs (simulated GPU reserve and context)" in article
    assert "No simulated curves" not in fresh["fit.md"] and "| full training |" in fresh["fit.md"]
    assert headings(fresh["versions.md"])[0].startswith("# Memory across library versions")


def test_a_second_refresh_finds_everything_current(main_job: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from generator.cli import refresh
    from generator.model_source import resolve_model

    again = refresh.refresh(resolve_model(str(TINY_MODEL)), main_job, 256)
    assert any("every finished row has one" in note for note in again.notes)
    assert any("already ran under a cap" in note for note in again.notes)
    assert any("current for these library versions" in note for note in again.notes)


def test_a_page_whose_data_is_missing_says_so_instead_of_dropping_it(measured_root: Path, tmp_path: Path) -> None:
    """Rows measured and nothing else: every page and section is there, each missing part named in one line."""
    from generator.report.site import build_pages

    pages = build_pages(measured_root)
    assert {"index.md", "versions.md", "fit.md"} <= set(pages)
    assert "No row of this environment ran under a cap yet" in pages["index.md"]
    assert "No row of this environment carries a prediction yet" in pages["index.md"]
    assert "No simulated rows of the example's own config" in pages["index.md"]
    assert "No simulated curves under" in pages["fit.md"]
    assert "measured under one set of library versions only" in pages["versions.md"]
