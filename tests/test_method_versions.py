"""Method versions by mode: version 3 changed how generation rows are measured (one position of the prompt's
logits, as generate() keeps), so a version-2 generation row is neither current nor comparable with a version-3
one, while rows of every other mode measured under version 2 still are."""

from dataclasses import replace
from pathlib import Path

import pytest

from generator.store import catalog, codec
from generator.store.comparability import comparable
from generator.store.records import METHOD_VERSION, same_method

REPO = Path(__file__).resolve().parent.parent
FOLDER = next((REPO / "measurements").glob("*e86098/SmolLM2-135M-Instruct"))
OLD = next((REPO / "measurements").glob("*03cace/SmolLM2-135M-Instruct"))


@pytest.mark.parametrize(("mode", "first", "second", "same"), [
    ("train", 2, 3, True), ("inference", 3, 2, True), ("generate", 2, 3, False), ("generate", 3, 3, True),
    ("train", 1, 3, False), ("generate", 1, 2, False)])
def test_a_version_counts_only_for_the_modes_it_changed(mode: str, first: int, second: int, same: bool) -> None:
    assert same_method(mode, first, second) is same


def test_a_generation_row_of_version_2_is_compared_with_version_3_no_more() -> None:
    new = codec.load_file(FOLDER / "gen-b1-s256-n64.toml")
    old = codec.load_file(OLD / "gen-b1-s256-n64.toml")
    assert (old.method_version, new.method_version) == (2, 3) == (2, METHOD_VERSION)
    assert comparable(old, new) == "method_version differs (2 against 3)"
    train = codec.load_file(OLD / "train-b8-s256.toml")
    assert comparable(train, replace(train, method_version=3)) == ""


def test_measure_redoes_a_version_2_generation_row_and_keeps_a_version_2_training_row(tmp_path: Path) -> None:
    for name in ("gen-b1-s256-n64.toml", "train-b8-s256.toml"):
        (tmp_path / name).write_text((OLD / name).read_text())
    sha = codec.load_file(OLD / "train-b8-s256.toml").model.config_sha256
    assert not catalog.is_current(tmp_path / "gen-b1-s256-n64.toml", sha)
    assert catalog.is_current(tmp_path / "train-b8-s256.toml", sha)


def test_the_versions_page_leaves_out_an_environment_with_nothing_comparable() -> None:
    """The committed e86098 folder holds only version-3 generation rows of SmolLM2, which no version-2 row of
    the article's environment can be compared with: the page names it as left out instead of failing."""
    from generator.report.site import build_pages

    page = build_pages(REPO / "measurements")["versions.md"]
    assert f"no row on both sides): `{FOLDER.parent.name}`." in page
    assert f"## {FOLDER.parent.name}" not in page.replace("\\_", "_")
