"""`build`: a measurements folder -> site/index.md, site/index.html and the charts.

Two phases, as in mkdocs: first load the results and render every file in memory (any error stops here and
leaves the old site untouched), then write them into a fresh folder that replaces the output folder whole.

Values from result files are data, never markup: the Markdown template escapes every value it places
(generator/escaping.py), the Markdown is rendered with raw HTML disabled, and the HTML layout autoescapes."""

import re
from dataclasses import replace
from pathlib import Path

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup

from generator import store
from generator.charts import render_svgs, to_svg, versions_chart
from generator.context import PageContext, build_context
from generator.escaping import markdown_code, markdown_text
from generator.fit_page import FitPageContext, build_fit_page
from generator.fit_results import load_fit
from generator.output import check_output, write_site
from generator.overhead import overhead_model
from generator.results import ResultsError
from generator.versions import VersionsContext, build_versions

# In an installed wheel the templates are package data (generator/templates/); in a checkout, templates/.
_HERE = Path(__file__).resolve().parent
TEMPLATES = next((folder for folder in (_HERE / "templates", _HERE.parent / "templates") if folder.is_dir()),
                 _HERE / "templates")


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
    """CommonMark with tables; raw HTML in the Markdown is shown as text, never passed through. Links between
    the Markdown pages (page.md) point at their HTML twins."""
    parser = MarkdownIt("commonmark", {"html": False, "typographer": False}).enable("table")
    tokens = parser.parse(markdown)
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


Page = PageContext | VersionsContext | FitPageContext


def heading_slug(text: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation and symbols dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def render_page(name: str, context: Page, templates: Path = TEMPLATES) -> dict[str, str]:
    """One page as Markdown (name.md) and as HTML (name.html)."""
    markdown = markdown_environment(templates).get_template(f"{name}.md.j2").render(context.__dict__)
    html = html_environment(templates).get_template("layout.html.j2").render(
        title=context.title, body=Markup(markdown_to_html(markdown)),
        stylesheet=Markup((templates / "style.css").read_text()))
    return {f"{name}.md": markdown, f"{name}.html": html}


def render_markdown(context: PageContext, templates: Path = TEMPLATES) -> dict[str, str]:
    """The article as Markdown and as HTML, keyed by file name."""
    return render_page("index", context, templates)


def render_pages(context: PageContext, versions: VersionsContext | None = None,
                 fit_page: FitPageContext | None = None, templates: Path = TEMPLATES) -> dict[str, str]:
    """Every output file's text, keyed by file name: the Markdown, the HTML made from it, and the SVGs."""
    article = replace(context, versions_page=versions is not None, fit_page=fit_page is not None)
    pages = {**render_markdown(article, templates), **render_svgs(context)}
    if versions is not None:
        pages.update(render_page("versions", versions, templates))
        pages["versions.svg"] = to_svg(versions_chart(versions))
    if fit_page is not None:
        pages.update(render_page("fit", fit_page, templates))
    return pages


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
    single_folder = bool(store.row_files(measurements))
    folder = selection.folder
    environment_folder = folder if folder.name == selection.environment else folder.parent
    fit_table = None if single_folder else load_fit(environment_folder)
    process = overhead_model(measurements, selection.environment)
    context = build_context(list(selection.results), process, fit_table)
    versions = None if single_folder else build_versions(selection, others(measurements, selection))
    fit_page = None
    if fit_table is not None and fit_table.answers:
        every_model = [r for selection in store.select_all(environment_folder) for r in selection.results]
        fit_page = build_fit_page(fit_table, every_model, process)
    return write_site(render_pages(context, versions, fit_page), output)


def others(measurements: Path, article: store.Selection) -> list[store.Selection]:
    """The article's model in every other environment."""
    found = [_try_select(folder, article.model) for folder in store.environments(measurements)]
    return [s for s in found if s is not None and s.folder != article.folder]
