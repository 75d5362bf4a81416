"""`build`: a measurements folder -> site/index.md, site/index.html, the other pages and the charts.

Two phases, as in mkdocs: first load the results (each file once, through a store Catalog) and render every
file in memory (any error stops here and leaves the old site untouched), then write them into a fresh folder
that replaces the output folder whole."""

from dataclasses import replace
from pathlib import Path

from generator.answers.accuracy import WITHIN
from generator.answers.overhead import overhead_model
from generator.answers.published import qlora_ppm
from generator.report.article import OtherModel, PageContext, build_context
from generator.report.charts import machine_of, render_svgs, to_svg
from generator.report.docs import render_docs
from generator.report.fit_page import FitPageContext, build_fit_page
from generator.report.gpu_validation import (
    checked_cells,
    context_line,
    first_screen_line,
    gpu_validation,
    validated_cells,
)
from generator.report.history import history_context
from generator.report.low_bit import low_bit_section
from generator.report.output import check_output, write_site
from generator.report.page_charts import accuracy_chart, history_chart, published_chart, versions_chart
from generator.report.published_page import PublishedPageContext, build_published_page
from generator.report.render import render_markdown, render_page
from generator.report.sharded import sharded_section
from generator.report.versions import VersionsContext, build_versions
from generator.store import layout
from generator.store.catalog import Catalog, Selection, newest
from generator.store.fit_table import find_fit, libraries
from generator.store.history import history_path, load_history
from generator.store.recorded_curves import find_recorded
from generator.store.records import ResultsError


def render_pages(context: PageContext, versions: VersionsContext | None = None,
                 fit_page: FitPageContext | None = None,
                 published: PublishedPageContext | None = None) -> dict[str, str]:
    """Every output file's text, keyed by file name: the Markdown, the HTML made from it, and the SVGs."""
    article = replace(context, versions_page=versions is not None, fit_page=fit_page is not None,
                      accuracy_chart=fit_page is not None and bool(fit_page.points),
                      published_page=published is not None)
    pages = {**render_markdown(article), **render_svgs(context), **render_docs()}
    if versions is not None:
        pages.update(render_page("versions", replace(versions, published_page=published is not None)))
        if versions.releases:
            pages["versions.svg"] = to_svg(versions_chart(versions))
        if versions.history is not None:
            pages["history.svg"] = to_svg(history_chart(versions.history))
    if fit_page is not None:
        pages.update(render_page("fit", fit_page))
        if fit_page.points:
            pages["accuracy.svg"] = to_svg(accuracy_chart(fit_page.points, WITHIN, machine_of(context)))
    if published is not None:
        pages.update(render_page("published", published))
        if published.points:
            pages["published.svg"] = to_svg(published_chart(published.points))
    return pages


def choose(catalog: Catalog, env: str | None, model: str | None) -> Selection:
    """The article's rows: the environment named, else the one with the newest library versions."""
    measurements = catalog.root
    if env is not None:
        return catalog.select(layout.resolve_environment(measurements, env), model)
    if layout.row_files(measurements):  # a single folder of rows
        return catalog.select(measurements, model)
    folders = layout.environments(measurements)
    if not folders:
        raise ResultsError(f"{measurements}: holds no result files; run `memory-budget measure` first")
    found = [selection for folder in folders if (selection := catalog.try_select(folder, model)) is not None]
    if not found:
        return catalog.select(folders[0], model)  # raises the reason: no such model
    return newest(found)


def others(catalog: Catalog, article: Selection) -> list[Selection]:
    """The article's model in every other environment."""
    found = [catalog.try_select(folder, article.model) for folder in layout.environments(catalog.root)]
    return [s for s in found if s is not None and s.folder != article.folder]


def build_pages(measurements: Path, env: str | None = None, model: str | None = None) -> dict[str, str]:
    """Load one environment's results and render every page in memory."""
    catalog = Catalog(measurements)
    selection = choose(catalog, env, model)
    single_folder = bool(layout.row_files(measurements))
    environment_folder = layout.environment_folder(selection.folder)
    environment = selection.results[0].environment
    fit_table = None if single_folder else find_fit(catalog.root, environment)
    process = overhead_model(catalog, environment)
    context = replace(build_context(list(selection.results), process, fit_table), other_models=tuple(
        OtherModel(name=other.model, folder=other.folder.name, rows=len(other.results))
        for other in catalog.select_all(environment_folder) if other.folder != selection.folder),
        low_bit=None if single_folder else low_bit_section(
            [catalog.every_result(folder) for folder in layout.environments(catalog.root)], environment.id))
    history = history_context(selection.model, load_history(history_path(measurements, selection.model)))
    versions = None if single_folder else build_versions(selection, others(catalog, selection), history)
    recorded = find_recorded(catalog.root, fit_table.libraries, fit_table.simulator,
                             fit_table.search) if fit_table else ()
    fit_page = None if single_folder else build_fit_page(
        fit_table, catalog.every_result(environment_folder), process, selection.environment, libraries(environment),
        recorded, qlora_ppm(catalog.root, "gpu"), fit_table.bitsandbytes if fit_table else "")
    validation = None if single_folder else gpu_validation(catalog)
    published_suite = None if single_folder else build_published_page(catalog.root)
    if fit_page is not None:
        fit_page = replace(fit_page, sharded=sharded_section(fit_table), gpu_line=first_screen_line(validation),
                           context_measured=context_line(validation), validated=validated_cells(validation),
                           checked=checked_cells(validation),
                           device_name=validation.device_name if validation else "",
                           published_page=published_suite is not None)
    if context.answer is not None:
        context = replace(context, gpu_line=first_screen_line(validation))
    return render_pages(context, versions, fit_page, published_suite)


def build_site(measurements: Path, output: Path, env: str | None = None, model: str | None = None,
               force: bool = False) -> list[Path]:
    """Render every page, then write them into the output folder (refused before rendering where unsafe)."""
    check_output(output, measurements, force)
    return write_site(build_pages(measurements, env, model), output, measurements, force)
