"""The docs: the README stays a page a person reads, the rest is pages of the site (generator/report/docs.py), every
link of the built site and the README leads somewhere that exists, and the docs type no measured figure."""

import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
# Figures with a unit the docs may state: the code's own constants, documented sources' figures and examples, and
# budgets given as inputs, each a setting or a rule rather than a measurement. Anything else with a unit (a time,
# a measured MiB, an error in per cent) belongs on a page that computes it from a result file.
CONSTANTS = {
    "512 bytes", "1 MiB", "2 MiB", "10 MiB", "20 MiB",  # the CUDA caching allocator's rules (answers/cuda_allocator.py)
    "16 MiB", "32 MiB", "128 MiB", "256 MiB", "140 MiB",  # its documented examples (tests/test_cuda_allocator.py)
    "338 MiB", "287,047,680 bytes",  # the context allowance and its published source (pytorch/pytorch#86509)
    "2 bytes", "4 bytes", "16 bytes", "20 bytes",  # bytes a parameter or a token of a stated recipe
    "24 GiB", "64 GiB", "80 GiB",  # cards and machines the pages answer for: inputs
    "5 %", "10 %", "100 %", "0.5 %", "1 %", "4 MiB",  # diff's floors, fit's margin and refusal, a history step
}
FIGURE = re.compile(r"\d[\d,.]*\s?(?:%|(?:MiB|GiB|KiB|GB|MB|KB|ms|min|s|bytes)\b)")


def _prose(text: str) -> str:
    """The Markdown's prose: code blocks and code spans left out (commands and file contents are inputs)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`]*`", "", text)


def test_the_readme_is_short_and_links_to_pages_that_exist() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    for target in re.findall(r"\]\(([^)#]+)", readme):
        if not target.startswith("http"):
            assert (REPO / target).is_file(), target


def test_every_docs_page_is_listed_and_types_no_measured_figure() -> None:
    from generator.report.docs import DOCS

    written = sorted(path.stem for path in (REPO / "templates").glob("docs-*.md"))
    assert sorted(name for name, _ in DOCS) == written
    for name in written:
        figures = set(FIGURE.findall(_prose((REPO / "templates" / f"{name}.md").read_text(encoding="utf-8"))))
        assert figures <= CONSTANTS, (name, sorted(figures - CONSTANTS))


def test_a_typed_timing_is_caught() -> None:
    """The check above can fail: a timing or a measured MiB in the prose is found, one in a code span is not."""
    assert FIGURE.findall(_prose("took 3.41 s, and 5,831 MiB `--budget 24GiB`")) == ["3.41 s", "5,831 MiB"]


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        for name in ("href", "src"):
            if tag in ("a", "img") and values.get(name):
                self.hrefs.append(str(values[name]))


@pytest.fixture(scope="module")
def built() -> dict[str, str]:
    from generator.report.site import build_pages

    return build_pages(REPO / "measurements")


def test_the_docs_are_built_under_a_docs_page_linked_from_the_article(built: dict[str, str]) -> None:
    from generator.report.docs import DOCS

    assert all(f"{name}.html" in built and f"{name}.md" in built for name, _ in DOCS)
    assert all(f'href="{name}.html"' in built["docs.html"] for name, _ in DOCS)
    assert 'href="docs.html"' in built["index.html"]


def test_no_link_of_the_built_site_is_dead(built: dict[str, str]) -> None:
    """Every relative link and image of every HTML page leads to a built file, and every #anchor to an id there."""
    parsed = {}
    for name, text in built.items():
        if name.endswith(".html"):
            parsed[name] = _Links()
            parsed[name].feed(text)
    checked = 0
    for name, links in parsed.items():
        for href in links.hrefs:
            if href.startswith(("http://", "https://", "data:", "mailto:")):
                continue
            page, _, anchor = href.partition("#")
            page = page or name
            assert page in built, (name, href)
            if anchor and page.endswith(".html"):
                assert anchor in parsed[page].ids, (name, href)
            checked += 1
    assert checked > 20
