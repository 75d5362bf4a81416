"""Values from result files and configs are data: they never become markup in the pages, the charts or the
terminal, and they still read literally."""

import json
import re
import tomllib
from html.parser import HTMLParser
from pathlib import Path

import tomli_w
from conftest import run_cli
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from rich.console import Console

from generator.escaping import markdown_code, markdown_text, terminal_text
from generator.report.article import build_context
from generator.report.render import markdown_to_html, render_markdown
from generator.store.catalog import load_folder as load_environment

PAYLOADS = ["<script>alert(1)</script>", "<img src=x onerror=alert(2)>", "<iframe src=javascript:alert(3)>",
            "<svg onload=alert(4)>", "[x](javascript:alert(5))", "[red]x[/red]"]
HOSTILE = " ".join(PAYLOADS)
REPO = Path(__file__).resolve().parent.parent
# Tags the article itself produces; anything else in the rendered HTML came from a value.
ARTICLE_TAGS = {"html", "head", "meta", "title", "style", "body", "main", "h1", "h2", "h3", "p", "ul", "ol",
                "li", "strong", "em", "code", "pre", "table", "thead", "tbody", "tr", "th", "td", "img", "a",
                "br", "hr", "nav", "footer", "header", "figure", "figcaption", "details", "summary", "section",
                "div", "span", "small", "blockquote"}


class _Page(HTMLParser):
    """The tags, attributes and visible text of a page."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.text: list[str] = []
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.tags.append((tag, dict(attrs)))

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    @property
    def visible(self) -> str:
        return " ".join(" ".join(self.text).split())


CALCULATOR = re.compile(r'<section id="calculator".*?</section>\n<script type="application/json" '
                        r'id="calculator-data">(?P<data>.*?)</script>\n<script>\n(?P<code>.*?)\n</script>', re.S)
CALCULATOR_TAGS = {"section", "h2", "p", "code", "form", "label", "select", "option", "input"}


def _without_calculator(html: str) -> str:
    """The fit page's calculator is the one place with a form and scripts: its markup is the template's alone
    (no value in it), its code is templates/calculator.js to the byte, and its data is JSON that no '<' can end
    early. What is left is checked like every other page."""
    found = CALCULATOR.search(html)
    if found is None:
        assert "<script" not in html and "<form" not in html
        return html
    section = _Page(found.group(0)[:found.group(0).index("</section>")])
    assert {tag for tag, _ in section.tags} <= CALCULATOR_TAGS, section.tags
    assert not any(name.startswith("on") for _, attrs in section.tags for name in attrs)
    assert found.group("code") == (REPO / "templates" / "calculator.js").read_text(encoding="utf-8")
    assert "<" not in found.group("data") and isinstance(json.loads(found.group("data")), dict)
    return html[:found.start()] + html[found.end():]


def assert_no_markup_from_values(html: str) -> _Page:
    page = _Page(_without_calculator(html))
    for tag, attrs in page.tags:
        if (tag, attrs) == ("link", {"rel": "icon", "href": "data:,"}):
            continue  # the layout's empty favicon, so that browsers ask the server for none
        assert tag in ARTICLE_TAGS, (tag, attrs)
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        for name in ("href", "src"):
            target = (attrs.get(name) or "").strip().lower()
            assert not target.startswith(("javascript:", "data:", "vbscript:")), (tag, attrs)
        if tag == "img":
            assert attrs["src"].endswith(".svg") and "/" not in attrs["src"], attrs
    return page


def poison(folder: Path) -> None:
    """Put the payloads in every place a value from a file reaches the page."""
    for path in folder.rglob("*.toml"):
        if path.name.startswith("_"):
            continue
        document = tomllib.loads(path.read_text())
        document["model"]["name"] = f"tiny_*model* {HOSTILE}"
        document["model"]["reference"] = f"{HOSTILE}.json"
        document["environment"]["cpu"] = f"CPU {HOSTILE}"
        if path.stem == "train-b8-s256-ckpt":
            document["result"].update(status="oom", phase="step2",
                                      detail=f"RuntimeError: [enforce fail at alloc_cpu.cpp:127] {HOSTILE}")
        path.write_text(tomli_w.dumps(document))


def test_hostile_values_are_text_in_every_output(measurements_copy: Path, tmp_path: Path) -> None:
    (folder,) = [p for p in measurements_copy.iterdir() if p.is_dir()]
    poison(folder)
    site = tmp_path / "site"
    result = run_cli("build", "--measurements", str(measurements_copy), "--output", str(site))
    assert result.returncode == 0, result.stderr
    html = (site / "index.html").read_text()
    page = assert_no_markup_from_values(html)
    for payload in PAYLOADS:
        assert page.visible.count(payload) >= 4, payload  # title, heading, text, CPU, failure detail
    assert "[enforce fail at alloc_cpu.cpp:127]" in page.visible and "tiny_*model*" in page.visible
    # The Markdown twin, rendered as a code host would, with raw HTML allowed: still no markup from values.
    markdown = (site / "index.md").read_text()
    as_host = MarkdownIt("commonmark", {"html": True}).enable("table").render(markdown)
    for payload in PAYLOADS:
        assert payload in _Page(as_host).visible, payload
    assert_no_markup_from_values(as_host)
    for chart in site.glob("*.svg"):  # charts name their model: the payloads are text there, never elements
        assert_no_markup_in_svg(chart.read_text())


def assert_no_markup_in_svg(svg: str) -> None:
    """An SVG parsed as XML: no script, iframe or foreign object, and no event-handler attribute."""
    import xml.etree.ElementTree as ElementTree

    for element in ElementTree.fromstring(svg).iter():
        name = element.tag.rsplit("}", 1)[-1].lower()
        assert name not in ("script", "iframe", "foreignobject"), name
        assert not any(attribute.rsplit("}", 1)[-1].lower().startswith("on") for attribute in element.attrib), (
            element.attrib)


def test_ordinary_text_reads_the_same(measured_folder: Path) -> None:
    context = build_context(load_environment(measured_folder))
    page = _Page(render_markdown(context)["index.html"])
    assert context.model_name in page.visible
    for text in ["q_proj", "1.5×", "−36 %", "A100-SXM4-80GB", "[enforce fail at alloc_cpu.cpp:127]", "a*b*c"]:
        assert _Page(markdown_to_html(markdown_text(text))).visible == text


def test_terminal_text_neither_restyles_nor_hides() -> None:
    console = Console(record=True, width=200, force_terminal=True)
    console.print(terminal_text("[red]x[/red] [bold]y \x1b[2Jz\rw"))
    assert console.export_text().strip() == "[red]x[/red] [bold]y \\x1b[2Jz\\rw"


VALUE = st.lists(st.sampled_from(list("<>[]()`*_!|&#-=+.:;/\\ \n\tabcxyz019\"'") + PAYLOADS),
                 max_size=20).map("".join)


@given(name=VALUE, reference=VALUE, cpu=VALUE, detail=VALUE)
@settings(max_examples=60, deadline=None)
def test_any_value_renders_as_its_own_text(measured_folder: Path, name: str, reference: str, cpu: str,
                                           detail: str) -> None:
    from dataclasses import replace

    results = load_environment(measured_folder)
    results = [replace(r, model=replace(r.model, name=name, reference=reference),
                       environment=replace(r.environment, cpu=cpu),
                       summary=replace(r.summary, status="error", phase="forward", detail=detail)
                       if r.row.id == "train-b1-s256" else r.summary) for r in results]
    pages = render_markdown(build_context(results))
    visible = assert_no_markup_from_values(pages["index.html"]).visible
    for value in (name, reference, cpu, detail):
        assert " ".join(value.split()) in visible
    assert_no_markup_from_values(MarkdownIt("commonmark", {"html": True}).enable("table").render(pages["index.md"]))


@given(VALUE)
@settings(max_examples=200, deadline=None)
def test_code_spans_hold_any_value(value: str) -> None:
    visible = _Page(markdown_to_html(markdown_code(value))).visible
    assert visible == " ".join(value.split())


def _string_fields(record: object) -> list[str]:
    from dataclasses import fields

    return [spec.name for spec in fields(record) if spec.type is str]  # type: ignore[arg-type]


def test_every_string_field_that_reaches_a_page_is_text(measured_folder: Path) -> None:
    """Generated from the records' declared fields, not a hand list: each string field of the model, the
    environment and the summary, poisoned in turn; wherever it reaches a page, it is text, not markup."""
    from dataclasses import replace

    results = list(load_environment(measured_folder))
    records = {"model": results[0].model, "environment": results[0].environment, "summary": results[0].summary}
    reached = []
    for table, record in records.items():
        for name in _string_fields(record):
            if (table, name) in (("environment", "id"), ("summary", "status"), ("summary", "phase")):
                continue  # validated ids and enumerations, refused by the loader when they are anything else
            marker = f"M4rk{table}{name}"
            payload = f"{marker} {HOSTILE}"

            poisoned = [replace(r, **{table: replace(getattr(r, table), **{name: payload})}) for r in results]
            pages = render_markdown(build_context(poisoned))
            html = assert_no_markup_from_values(pages["index.html"])
            as_host = assert_no_markup_from_values(
                MarkdownIt("commonmark", {"html": True}).enable("table").render(pages["index.md"]))
            if marker in html.visible:
                reached.append(f"{table}.{name}")
                literal = PAYLOADS[0]  # shown as text; lists such as LoRA targets are re-joined with commas
                assert literal in html.visible and literal in as_host.visible, (table, name)
    assert {"environment.os", "environment.cpu", "model.name"} <= set(reached), reached


def _poison_every_file(root: Path) -> None:
    """The payloads in every string a row file, a fit table or a recording gives the pages: model names and
    references, the CPU, and the curves', the worked example's and the recorded models' names."""
    for path in root.rglob("*.toml"):
        document = tomllib.loads(path.read_text())
        if path.name == "_fit.toml":
            for entry in (*document.get("curves", []), *document.get("example", [])):
                entry["model"] = f"{entry['model']} {HOSTILE}"
        elif path.parent.name == "_curves":  # a recorded model (fit --model X --record): its name, everywhere
            document["model"] = f"{document['model']} {HOSTILE}"
            for entry in document["curves"]:
                entry["model"] = document["model"]
        elif path.parent.name == "_published" and not path.name.startswith("_"):  # a published source's text
            for key in ("title", "statistic", "data", "program", "repository", "path"):
                document[key] = f"{document[key]} {HOSTILE}"
            for entry in document["entry"]:
                for key in ("recipe", "machine", "hub", "differs"):
                    entry[key] = f"{entry.get(key, '')} {HOSTILE}"
        elif not path.name.startswith("_") and "model" in document:
            document["model"]["name"] = f"{document['model']['name']} {HOSTILE}"
            document["model"]["reference"] = f"{HOSTILE}.json"
            document["environment"]["cpu"] = f"CPU {HOSTILE}"
        else:
            continue
        path.write_text(tomli_w.dumps(document))


def test_every_page_and_both_twins_keep_values_as_text(tmp_path: Path) -> None:
    """Every page the committed measurements build (article, fit, versions), poisoned, in both twins: the HTML
    as built, and the Markdown as a code host renders it, raw HTML allowed."""
    import shutil

    from generator.report.site import build_pages

    root = tmp_path / "measurements"
    shutil.copytree(Path(__file__).resolve().parent.parent / "measurements", root)
    _poison_every_file(root)
    pages = build_pages(root)
    names = sorted(name.rsplit(".", 1)[0] for name in pages if name.endswith(".md") and not name.startswith("docs"))
    assert names == ["fit", "index", "published", "versions"], names
    docs = [text for name, text in pages.items() if name.startswith("docs")]  # the tool's own text: no value placed
    assert docs and not any(payload in text for text in docs for payload in PAYLOADS)
    for name in names:
        html = assert_no_markup_from_values(pages[f"{name}.html"])
        as_host = assert_no_markup_from_values(
            MarkdownIt("commonmark", {"html": True}).enable("table").render(pages[f"{name}.md"]))
        for payload in PAYLOADS:
            assert payload in html.visible and payload in as_host.visible, (name, payload)


def test_the_calculator_data_cannot_end_its_script() -> None:
    from generator.report.calculator import CalculatorData

    hostile = {"model": HOSTILE + " </script><!-- & ]]>"}
    text = CalculatorData(json.dumps(hostile)).script_json()
    assert "<" not in text and ">" not in text and "&" not in text
    assert json.loads(text) == hostile  # and it still reads back as the same value
