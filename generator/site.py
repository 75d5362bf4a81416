"""`build`: a measurements folder -> site/index.md, site/index.html and the charts.

Two phases, as in mkdocs: first load the results and render every file in memory (any error stops here and
leaves the old site untouched), then write them into a fresh folder that replaces the output folder whole.

Values from result files are data, never markup: the Markdown template escapes every value it places
(generator/escaping.py), the Markdown is rendered with raw HTML disabled, and the HTML layout autoescapes."""

from pathlib import Path

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup

from generator import store
from generator.charts import render_svgs
from generator.context import PageContext, build_context
from generator.escaping import markdown_code, markdown_text
from generator.output import check_output, write_site
from generator.results import ResultsError

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def markdown_environment(templates: Path = TEMPLATES) -> jinja2.Environment:
    """Jinja for Markdown: every placed value is escaped as Markdown text unless the tool made it Markdown."""
    jinja = jinja2.Environment(loader=jinja2.FileSystemLoader(templates), undefined=jinja2.StrictUndefined,
                               autoescape=False, keep_trailing_newline=True, trim_blocks=False,
                               finalize=markdown_text)
    jinja.filters["code"] = markdown_code
    return jinja


def html_environment(templates: Path = TEMPLATES) -> jinja2.Environment:
    """Jinja for HTML: autoescaped."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(templates), undefined=jinja2.StrictUndefined,
                              autoescape=True, keep_trailing_newline=True)


def markdown_to_html(markdown: str) -> str:
    """CommonMark with tables; raw HTML in the Markdown is shown as text, never passed through."""
    return MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table").render(markdown)


def render_markdown(context: PageContext, templates: Path = TEMPLATES) -> dict[str, str]:
    """The article as Markdown and as HTML, keyed by file name."""
    markdown = markdown_environment(templates).get_template("index.md.j2").render(context.__dict__)
    html = html_environment(templates).get_template("layout.html.j2").render(
        title=context.title, body=Markup(markdown_to_html(markdown)),
        stylesheet=Markup((templates / "style.css").read_text()))
    return {"index.md": markdown, "index.html": html}


def render_pages(context: PageContext, templates: Path = TEMPLATES) -> dict[str, str]:
    """Every output file's text, keyed by file name: the Markdown, the HTML made from it, and the SVGs."""
    return {**render_markdown(context, templates), **render_svgs(context)}


def choose(measurements: Path, env: str | None, model: str | None) -> store.Selection:
    """The article's rows: the environment named, else the one with the newest library versions."""
    if env is not None:
        return store.select(store.resolve_environment(measurements, env), model)
    if store.row_files(measurements):  # a single folder of rows
        return store.select(measurements, model)
    folders = store.environments(measurements)
    if not folders:
        raise ResultsError(f"{measurements}: holds no result files; run `memory-budget measure` first")
    selections = [_try_select(folder, model) for folder in folders]
    found = [selection for selection in selections if selection is not None]
    if not found:
        return store.select(folders[0], model)  # raises the reason: no such model
    return store.newest(found)


def _try_select(folder: Path, model: str | None) -> store.Selection | None:
    try:
        return store.select(folder, model)
    except store.UnknownModelError:
        return None


def build_site(measurements: Path, output: Path, env: str | None = None, model: str | None = None) -> list[Path]:
    """Load one environment's results, render the pages, then write them."""
    check_output(output)
    selection = choose(measurements, env, model)
    context = build_context(list(selection.results))
    return write_site(render_pages(context), output)
