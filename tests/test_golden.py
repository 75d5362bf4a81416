"""The golden build: a clean build from the committed measurements/ reproduces the committed site/ byte for byte.

Any change to an answer, a sentence or a chart shows up here as a diff of the pages, whether it is a planted bug
or a change whose site/ was not rebuilt (`nox -s build`, then commit site/)."""

import difflib
from itertools import pairwise
from pathlib import Path

import pytest

from generator.report.output import MANIFEST, manifest_text
from generator.report.site import build_pages

ROOT = Path(__file__).resolve().parent.parent
SHOWN_LINES = 40  # of each page's diff, so that a failure stays readable


def _diff(name: str, committed: str, built: str) -> str:
    lines = difflib.unified_diff(committed.splitlines(), built.splitlines(), f"site/{name} (committed)",
                                 f"site/{name} (built now)", lineterm="", n=0)
    shown = list(lines)
    more = f"\n... and {len(shown) - SHOWN_LINES} more lines" if len(shown) > SHOWN_LINES else ""
    return "\n".join(shown[:SHOWN_LINES]) + more


def test_a_clean_build_reproduces_the_committed_site(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)  # the committed pages carry the newest measurement's date
    pages = build_pages(ROOT / "measurements")
    pages[MANIFEST] = manifest_text(sorted(pages))
    committed = {path.name: path.read_text(encoding="utf-8") for path in (ROOT / "site").iterdir() if path.is_file()}
    assert sorted(pages) == sorted(committed), "site/ holds other files than a build writes: rebuild with nox -s build"
    changed = [_diff(name, committed[name], pages[name]) for name in sorted(pages) if pages[name] != committed[name]]
    assert not changed, ("a build from measurements/ gives other pages than site/ holds; rebuild with "
                         "`nox -s build` and commit site/ if the change is meant:\n\n" + "\n\n".join(changed))


def test_no_table_repeats_a_column_label() -> None:
    """On a phone every table row becomes a card whose values are labelled by the column headers: a label used
    twice in one table ('error', 'error') leaves the reader guessing which is which."""
    for page in sorted((ROOT / "site").glob("*.md")):
        lines = page.read_text(encoding="utf-8").splitlines()
        for header, rule in pairwise(lines):  # a header row is the line before a |---| rule
            if rule.startswith("|---"):
                labels = [cell.strip() for cell in header.strip().strip("|").split("|")]
                assert len(labels) == len(set(labels)), (page.name, labels)
