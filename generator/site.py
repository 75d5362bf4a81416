"""`build`: a measurements folder -> site/index.md, site/index.html and the charts.

Two phases, as in mkdocs: first load the results and render every file in memory (any error stops here and
leaves the old site untouched), then write them into a fresh folder that replaces the output folder whole."""

import shutil
import tempfile
from pathlib import Path

import jinja2
from markdown_it import MarkdownIt

from generator.charts import render_svgs
from generator.context import PageContext, build_context
from generator.loading import choose_environment, load_environment

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


class OutputError(ValueError):
    """An output path that build must not replace."""


def check_output(output: Path) -> None:
    """Refuse to replace a file, or a folder that holds something other than a previous build."""
    if output.exists() and not output.is_dir():
        raise OutputError(f"--output {output}: is a file, not a folder")
    if output.is_dir() and any(output.iterdir()) and not (output / "index.md").is_file():
        raise OutputError(f"--output {output}: not empty and not a previous build (no index.md); "
                          "refusing to replace it")


def write_site(files: dict[str, str], output: Path) -> list[Path]:
    """Replace the output folder with exactly these files; a failure leaves the old folder as it was."""
    check_output(output)
    output = output.resolve()
    output.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; a site is meant to be served
    try:
        for name, text in sorted(files.items()):
            (staging / name).write_text(text, encoding="utf-8")
        old = output.with_name(f".{output.name}-old")
        shutil.rmtree(old, ignore_errors=True)
        if output.exists():
            output.rename(old)
        staging.rename(output)
        shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [output / name for name in sorted(files)]


def build_site(measurements: Path, output: Path, env: str | None = None) -> list[Path]:
    """Load one environment's results, render the pages, then write them."""
    check_output(output)
    folder = choose_environment(measurements, env)
    context = build_context(load_environment(folder))
    return write_site(render_pages(context), output)
