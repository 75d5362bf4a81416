"""Rendering pages: Jinja2 templates (loaded through importlib.resources from the installed package) into
Markdown, and Markdown into HTML.

Values from result files are data, never markup: the Markdown template escapes every value it places
(generator/escaping.py), the Markdown is rendered with raw HTML disabled, and the HTML layout autoescapes."""

from importlib import resources
from importlib.resources.abc import Traversable

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup

from generator.escaping import heading_slug, markdown_code, markdown_text, one_line
from generator.report.article import PageContext
from generator.report.fit_page import FitPageContext
from generator.report.published_page import PublishedPageContext
from generator.report.versions import VersionsContext

Page = PageContext | VersionsContext | FitPageContext | PublishedPageContext


def templates() -> Traversable:
    """The templates folder of the installed package (templates/ in a checkout, generator/templates/ in a wheel)."""
    return resources.files("generator.templates")


def _loader() -> jinja2.FunctionLoader:
    def load(name: str) -> str | None:
        path = templates() / name
        return path.read_text(encoding="utf-8") if path.is_file() else None
    return jinja2.FunctionLoader(load)


def markdown_environment() -> jinja2.Environment:
    """Jinja for Markdown: every placed value is escaped as Markdown text unless the tool made it Markdown."""
    jinja = jinja2.Environment(loader=_loader(), undefined=jinja2.StrictUndefined, autoescape=False,
                               keep_trailing_newline=True, trim_blocks=False, finalize=markdown_text)
    jinja.filters["code"] = markdown_code
    return jinja


def html_environment() -> jinja2.Environment:
    """Jinja for HTML: autoescaped."""
    return jinja2.Environment(loader=_loader(), undefined=jinja2.StrictUndefined, autoescape=True,
                              keep_trailing_newline=True)


def label_cells(tokens: list) -> None:
    """Give each table cell its column's header as data-label, so a phone can show a row as a card of labelled
    values (templates/style.css) instead of a table that scrolls sideways and hides its answer column."""
    headers: list[str] = []
    column = 0
    for index, token in enumerate(tokens):
        if token.type == "thead_open":
            headers = []
        elif token.type == "th_open":
            headers.append(tokens[index + 1].content)
        elif token.type == "tr_open":
            column = 0
        elif token.type == "td_open":
            if column < len(headers) and headers[column]:
                token.attrSet("data-label", headers[column].replace("*", "").replace("`", ""))
            column += 1


def markdown_to_html(markdown: str) -> str:
    """CommonMark with tables; raw HTML in the Markdown is shown as text, never passed through. Links between
    the Markdown pages (page.md) point at their HTML twins."""
    parser = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table")
    tokens = parser.parse(markdown)
    label_cells(tokens)
    slugs: dict[str, int] = {}
    for index, token in enumerate(tokens):
        if token.type == "heading_open":  # ids as a code host makes them, so #anchors work in both twins
            slug = heading_slug(tokens[index + 1].content)
            token.attrSet("id", slug if slug not in slugs else f"{slug}-{slugs[slug]}")
            slugs[slug] = slugs.get(slug, 0) + 1
        for child in token.children or ():
            href = str(child.attrGet("href") or "")
            if child.type == "link_open" and "/" not in href and href.split("#")[0].endswith(".md"):
                child.attrSet("href", href.replace(".md", ".html", 1))
    return parser.renderer.render(tokens, parser.options, {})


def render_page(name: str, context: Page) -> dict[str, str]:
    """One page as Markdown (name.md) and as HTML (name.html)."""
    markdown = markdown_environment().get_template(f"{name}.md.j2").render(context.__dict__)
    body = _body(markdown, getattr(context, "calculator", None))
    html = page_html(context.title, folded(body) if getattr(context, "folded", False) else body)
    return {f"{name}.md": markdown, f"{name}.html": html}


def page_html(title: str, body: str) -> str:
    """A page's HTML: the layout around a body the Markdown renderer made, with the inlined stylesheet."""
    return html_environment().get_template("layout.html.j2").render(
        title=one_line(title),  # autoescaped, and no control character reaches <title> either
        body=Markup(body), stylesheet=Markup((templates() / "style.css").read_text(encoding="utf-8")))


def folded(html: str) -> str:
    """The page with each second-level section folded under its heading (a <details> whose summary is the
    heading), so that a long page's first screen is its answer and the sections' headings; the Markdown twin,
    which a code host renders, stays unfolded. The html is markdown_to_html's, which passes no raw HTML through,
    so every '<h2' in it is a heading."""
    head, *sections = html.split("<h2")
    parts = [section.partition("</h2>") for section in sections]
    return head + "".join(f"<details><summary><h2{heading}</h2></summary>{rest}</details>\n"
                          for heading, _, rest in parts)


def _body(markdown: str, calculator) -> str:  # calculator: CalculatorData | None
    """The page's HTML; a page with a calculator gets it before its first second-level section (the HTML twin
    only: the Markdown twin has the same answers in its tables)."""
    head, mark, rest = markdown.partition("\n## ")
    if calculator is None or not mark:
        return markdown_to_html(markdown)
    widget = html_environment().get_template("calculator.html.j2").render(
        data=calculator.script_json(), script=Markup((templates() / "calculator.js").read_text(encoding="utf-8")))
    return markdown_to_html(head) + widget + "\n" + markdown_to_html("## " + rest)


def render_markdown(context: PageContext) -> dict[str, str]:
    """The article as Markdown and as HTML, keyed by file name."""
    return render_page("index", context)
