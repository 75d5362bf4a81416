"""The article's context: one function turns an environment's rows into frozen, typed values.

Everything the page shows is computed from the result files (figures, ratios, fits, verdicts: views.py,
findings.py, example.py) and carried as text ready to place; the templates contain no arithmetic and no
figures of their own."""

import os
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from generator.budget import EXAMPLE_PARAMETERS, ProcessModel
from generator.matrix import DEFAULT_ALLOCATOR, Mode
from generator.report.allocators import AllocatorComparison, compare_allocators
from generator.report.answer import FirstAnswer, first_answer
from generator.report.claims import GpuCarry, LargeModel, gpu_carry, large_model
from generator.report.example import (
    Budget,
    Example,
    budget,
    example,
    simulated_lines,
)
from generator.report.findings import (
    CappedRun,
    Findings,
    Headline,
    Noise,
    Verdict,
    capped_runs,
    findings,
    headline,
    noise,
    verdict,
)
from generator.report.low_bit import LowBitSection
from generator.report.views import (
    Figure,
    OverheadSummary,
    Ratio,
    RowView,
    article_row,
    figure,
    overhead_summary,
    row_view,
)
from generator.store.configs import vocabulary_size
from generator.store.environment import Environment
from generator.store.fit_table import FitTable
from generator.store.records import ModelInfo, RowResult
from generator.units import format_gib


@dataclass(frozen=True)
class OtherModel:
    """Another model whose rows this environment holds: the page names it and how to build its own page."""

    name: str
    folder: str  # its folder under the environment, which `build --model` also takes
    rows: int


@dataclass(frozen=True)
class PageContext:
    """Everything the templates place."""

    title: str
    model_name: str
    model_source: str
    model_reference: str
    config_sha256: str
    parameters: int
    parameters_text: str
    environment: dict[str, str]
    environment_id: str
    measured_on: str
    built_on: str
    baseline: Figure | None
    rows: tuple[RowView, ...]
    failed_rows: tuple[RowView, ...]
    has_cuda: bool
    budget: Budget
    findings: Findings
    example: Example
    capped_runs: tuple[CappedRun, ...]
    peak_method: str
    setup_share_train_b8: Ratio | None
    versions_page: bool = False  # the site has a page comparing library versions
    fit_page: bool = False  # the site has the simulated fit page
    accuracy_chart: bool = False  # the site draws predicted against measured for every model (accuracy.svg)
    published_page: bool = False  # the site has the page of published GPU figures (published.md)
    overhead: OverheadSummary | None = None
    has_predictions: bool = False
    headline: Headline | None = None
    verdict: Verdict | None = None
    noise: Noise | None = None
    allocators: AllocatorComparison | None = None
    gpu_carry: GpuCarry | None = None  # CUDA's simulated tensor peaks against the CPU's, over the rows shown
    large_model: LargeModel | None = None  # the worked example's model: which share its training peak is
    answer: FirstAnswer | None = None  # the first screen: will it fit, from the fit page's computation
    gpu_line: str = ""  # which of its GPU figures are simulated and which a device confirmed
    other_models: tuple[OtherModel, ...] = ()  # the other models measured in this environment
    pairs_note: str = ""  # the shown rows with exactly two repeats, whose brackets give both instead of a range
    low_bit: LowBitSection | None = None  # QLoRA and 8-bit AdamW, measured where bitsandbytes runs



def pairs_note(pairs: int) -> str:
    """What the brackets of rows with two repeats mean, where there are such rows."""
    if not pairs:
        return ""
    if pairs == 1:
        return "1 row has two repeats only: its brackets give both, and its figure is their midpoint"
    return f"{pairs} rows have two repeats only: their brackets give both, and each figure is their midpoint"


def built_on(results: Sequence[RowResult]) -> str:
    """The build date: SOURCE_DATE_EPOCH if set, else the newest measurement, so rebuilding changes nothing."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC).date().isoformat()
    return max(result.measured_at for result in results)[:10]


@dataclass(frozen=True)
class _Rows:
    """An environment's rows in page order, with what every section needs from them."""

    ordered: tuple[RowResult, ...]
    first: RowResult  # the first row with a model: whose name and config the page names
    parameters: int  # the base model's parameters (a LoRA row's adapters left out)
    seq_len: int  # the length most rows were measured at
    views: dict[str, RowView]
    uncapped: dict[str, RowView]


def _rows(results: Sequence[RowResult], process: ProcessModel | None) -> _Rows:
    ordered = tuple(sorted(results, key=lambda r: (r.row.mode != Mode.BASELINE, r.row.memory_limit_bytes > 0,
                                                   r.row.mode, r.row.tokens_per_step, r.row.id)))
    modelled = [r for r in ordered if r.row.mode != Mode.BASELINE and r.model.parameters]
    parameters = max((r.model.parameters - r.model.trainable_parameters if r.row.lora_rank
                      else r.model.parameters) for r in modelled) if modelled else 0
    views = {r.row.id: row_view(r, parameters, process) for r in ordered}
    return _Rows(ordered=ordered, first=modelled[0] if modelled else ordered[0], parameters=parameters,
                 seq_len=statistics.mode([r.row.seq_len for r in modelled]) if modelled else 0, views=views,
                 uncapped={row_id: view for row_id, view in views.items() if not view.memory_limit})


def environment_table(environment: Environment) -> dict[str, str]:
    """The set-up, as the page's footer lists it."""
    return {"Python": environment.python, "torch": environment.torch, "transformers": environment.transformers,
            "peft": environment.peft, "device": environment.device,
            "CPU": f"{environment.cpu} ({environment.cpu_count} cores; "
                   f"{environment.cpu_features or 'no flags read'})",
            "memory": format_gib(environment.total_memory_bytes), "OS": environment.os}


def _model_fields(model: ModelInfo, parameters: int) -> dict[str, object]:
    return {"title": f"It runs, so why won't it train? Peak memory of {model.name}", "model_name": model.name,
            "model_source": model.source, "model_reference": model.reference,
            "config_sha256": model.config_sha256, "parameters": parameters, "parameters_text": f"{parameters:,}"}


def example_model(fit_table: FitTable | None) -> tuple[str, int]:
    """The worked example's model and its real parameter count, where the fit table simulated it."""
    name = fit_table.example[0].model if fit_table and fit_table.example else ""
    curve = next((c for c in fit_table.curves if c.model == name), None) if fit_table else None
    return (name, curve.parameters) if curve else ("", EXAMPLE_PARAMETERS)


def build_context(results: Sequence[RowResult], process: ProcessModel | None = None,
                  fit_table: FitTable | None = None) -> PageContext:
    """Turn one environment's rows into the page's context."""
    rows = _rows(results, process)
    uncapped, views, seq_len, parameters = rows.uncapped, rows.views, rows.seq_len, rows.parameters
    lora_row = next((v for v in uncapped.values() if v.lora_rank and v.ok), None)
    baseline = next((r for r in rows.ordered if r.row.mode == Mode.BASELINE and r.summary.ok), None)
    plain = uncapped.get(article_row(seq_len))
    page_findings = findings(uncapped, parameters, lora_row, seq_len, vocabulary_size(rows.first.model.config_sha256))
    runs = capped_runs(rows.ordered, views)
    overhead = overhead_summary(list(views.values()), process)
    shown = tuple(view for view in uncapped.values()
                  if view.mode != Mode.BASELINE and view.allocator == DEFAULT_ALLOCATOR)
    return PageContext(
        **_model_fields(rows.first.model, parameters),  # type: ignore[arg-type]
        environment=environment_table(rows.first.environment),
        environment_id=rows.first.environment.id,
        measured_on=max(r.measured_at for r in rows.ordered)[:10],
        built_on=built_on(rows.ordered),
        baseline=figure(baseline.summary.baseline_bytes) if baseline else None,
        rows=shown, pairs_note=pairs_note(sum(view.pair for view in shown)),
        failed_rows=tuple(view for view in views.values() if not view.ok and not view.memory_limit),
        has_cuda=any(view.cuda_reserved for view in views.values()),
        budget=budget(parameters, plain),
        findings=page_findings,
        example=replace(example(uncapped, page_findings.fit, parameters, seq_len, example_model(fit_table)),
                        simulated=simulated_lines(fit_table),
                        simulated_model=fit_table.example[0].model if fit_table and fit_table.example else ""),
        capped_runs=runs,
        peak_method=next((r.repeats[0].peak_method for r in rows.ordered if r.repeats), ""),
        setup_share_train_b8=plain.setup_share if plain else None,
        overhead=overhead,
        has_predictions=any(view.predicted for view in views.values()),
        headline=headline(uncapped, seq_len, runs),
        noise=noise(rows.ordered),
        verdict=verdict(page_findings, uncapped, seq_len, overhead),
        allocators=compare_allocators(list(rows.ordered)),
        large_model=large_model(fit_table),
        gpu_carry=gpu_carry(shown),
        answer=first_answer(fit_table, rows.first.model.name, process) if process is not None else None,
    )
