"""The docs pages: the reference (commands, files, method, development) that a README would otherwise carry,
written in Markdown in templates/docs-*.md and built into site/ beside the article, each page as Markdown and as
HTML, under a "Docs" index page. They are the tool's own text, not data: they are placed as written, and they hold
no measured figure (a figure on the site comes from a result file: tests/test_docs.py holds them to that, and
checks every link of the built site)."""

from generator.report.render import markdown_to_html, page_html, templates

DOCS = (  # (page, title): the docs pages in the order the index lists them
    ("docs-commands", "The command line, its files and its refusals"),
    ("docs-predicting", "Predicting before you run: predict, fit, the GPU's program and the published figures"),
    ("docs-releases", "Library versions: diff, the release history and the day a release ships"),
    ("docs-cluster", "Running on a cluster"),
    ("docs-method", "How it measures, and how the pages read"),
    ("docs-development", "Development: the layout, the stages, the test tiers"),
)
INDEX_TITLE = "Docs"


def index_markdown() -> str:
    """The Docs page: a line per docs page, linked, and the way back to the write-up."""
    lines = [f"# {INDEX_TITLE}", "", "How to run memory-budget and how it works; the figures are on the "
             "[write-up](index.md), the [fit page](fit.md) and the [versions page](versions.md).", ""]
    lines += [f"- [{title}]({name}.md)" for name, title in DOCS]
    return "\n".join(lines) + "\n"


def render_docs() -> dict[str, str]:
    """Every docs page and the index, as Markdown and HTML, keyed by file name."""
    pages = {"docs.md": index_markdown()}
    for name, _ in DOCS:
        text = (templates() / f"{name}.md").read_text(encoding="utf-8")
        pages[f"{name}.md"] = text + "\n[All docs](docs.md) · [the write-up](index.md)\n"
    html = {name.replace(".md", ".html"): page_html(text.partition("\n")[0].removeprefix("# "),
                                                       markdown_to_html(text))
            for name, text in pages.items()}
    return {**pages, **html}
