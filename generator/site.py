"""`build`: a measurements folder -> site/index.md, site/index.html and the charts.

Two phases, as in mkdocs: first load the results and render every file in memory (any error stops here and
leaves the old site untouched), then write them into a fresh folder that replaces the output folder whole."""

from pathlib import Path

import jinja2
from markdown_it import MarkdownIt

from generator.charts import render_svgs
from generator.context import PageContext, build_context
from generator.loading import choose_environment, load_environment
from generator.output import check_output, write_site

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def _environment(templates: Path) -> jinja2.Environment:
    return jinja2.Environment(loader=jinja2.FileSystemLoader(templates), undefined=jinja2.StrictUndefined,
                              autoescape=False, keep_trailing_newline=True, trim_blocks=False)


def render_pages(context: PageContext, templates: Path = TEMPLATES) -> dict[str, str]:
    """Every output file's text, keyed by file name: the Markdown, the HTML made from it, and the SVGs."""
    jinja = _environment(templates)
    markdown = jinja.get_template("index.md.j2").render(context.__dict__)
    body = MarkdownIt("commonmark", {"typographer": False}).enable("table").render(markdown)
    title = markdown.splitlines()[0].lstrip("# ").strip()
    html = jinja.get_template("layout.html.j2").render(
        title=jinja2.filters.escape(title), body=body, stylesheet=(templates / "style.css").read_text())
    return {"index.md": markdown, "index.html": html, **render_svgs(context)}


def build_site(measurements: Path, output: Path, env: str | None = None) -> list[Path]:
    """Load one environment's results, render the pages, then write them."""
    check_output(output)
    folder = choose_environment(measurements, env)
    context = build_context(load_environment(folder))
    return write_site(render_pages(context), output)
