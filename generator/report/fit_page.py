"""The fit page's context: a table per shipped config with a column per budget, answered at build time from
the simulated curves (generator/store/fit_table.py) and this environment's process model, beside the accuracy
of the predictions on the measured rows. Frozen and typed; the template places values only."""

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from generator.answers.accuracy import WITHIN, Accuracy, Judged, accuracy
from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES, context_allowance_source, cuda_rules
from generator.answers.fit import (
    CPU_BUDGETS_GIB,
    GPU_GROUPS_GIB,
    STATED_MARGIN,
    FitAnswer,
    usable_bytes,
)
from generator.answers.from_curve import curve_answer
from generator.answers.published import PPM
from generator.budget import EXAMPLE_CARD_BYTES, ProcessModel
from generator.matrix import ALLOCATORS, DEFAULT_ALLOCATOR, Mode
from generator.report.between import BetweenText, between_text
from generator.report.calculator import CalculatorData, calculator_data
from generator.report.fit_first import FirstLine, card_text, cell, first_lines, legend
from generator.store.fit_table import FitTable
from generator.store.recorded_curves import RecordedCurves
from generator.store.records import RowResult

if TYPE_CHECKING:
    from generator.report.sharded import ShardedSection
from generator.units import GIB, MIB, format_mib, mib_range, signed_percent


@dataclass(frozen=True)
class FitModelView:
    """One config: a row per way of running it, a cell per budget."""

    name: str
    parameters_text: str
    tables: tuple["BudgetTable", ...]  # one per group of budgets: smaller cards, larger cards, CPU machines


@dataclass(frozen=True)
class BudgetTable:
    """One group of budgets: its heading, its columns and a row per way of running the config."""

    heading: str  # "On a GPU"
    labels: tuple[str, ...]  # "8 GiB GPU", ...
    rows: tuple[tuple[str, ...], ...]  # (kind, cell, cell, ...)


@dataclass(frozen=True)
class Budget:
    """A column of the tables: a budget on a GPU (the simulated caching allocator and a context allowance) or
    in a CPU machine's memory (this machine's measured process overhead)."""

    label: str  # "24 GiB GPU"
    n_bytes: int
    target: str  # "gpu" or "cpu"
    margin: float
    group: str = ""  # the table it is a column of: "On a GPU of 8 to 24 GiB"


@dataclass(frozen=True)
class JudgedRow:
    """A measured row against its predictions, in sample and out of sample."""

    model: str
    row: str  # its allocator is the section's (AllocatorAccuracy)
    measured: str  # median, with the spread of the independent repeats
    tensor: str  # each prediction with its error against the measured median: '5,830 MiB (−3.1 %)'
    in_sample: str
    out_of_sample: str  # '–' where the row's model was the only one measured, so nothing was held out


@dataclass(frozen=True)
class AllocatorAccuracy:
    """One allocator's judged rows and what they add up to."""

    allocator: str
    rows: tuple[JudgedRow, ...]
    judged: int  # rows with an out-of-sample prediction
    within_5: int
    median_error: str
    worst_error: str
    in_sample_median: str
    in_sample_worst: str
    margin: str  # the band fit keeps free under this allocator
    exceeded: int  # rows whose measurement ran over the budget fit would have allowed, at that band


@dataclass(frozen=True)
class AccuracyPoint:
    """One measured row against its prediction, for the predicted-against-measured chart (MiB)."""

    model: str
    row: str
    allocator: str
    measured: float  # the median of the independent repeats, net of imports
    low: float  # their lowest and highest
    high: float
    predicted: float  # out of sample where another model's rows could fit the line, else in sample
    held_out: bool


def accuracy_points(judged: dict[str, Accuracy | None]) -> tuple[AccuracyPoint, ...]:
    """Every judged row of every allocator, as the chart draws it."""
    return tuple(AccuracyPoint(model=row.model, row=row.row, allocator=allocator, measured=row.measured_bytes / MIB,
                               low=row.low_bytes / MIB, high=row.high_bytes / MIB,
                               predicted=(row.out_of_sample_bytes or row.in_sample_bytes) / MIB,
                               held_out=bool(row.out_of_sample_bytes))
                 for allocator, found in judged.items() if found is not None for row in found.rows)


@dataclass(frozen=True)
class FitPageContext:
    """Everything fit.md.j2 places."""

    title: str
    environment: str
    seq_len_text: str
    process_model: str
    budgets: tuple[Budget, ...]
    models: tuple[FitModelView, ...]
    gpu_margin_text: str = ""
    cpu_margin_text: str = ""
    context_allowance: str = ""
    context_source: str = ""
    gpu_rules: str = ""
    qlora_allowance: str = ""  # "x1.235": QLoRA's allowance on its GPU answers' reserves; '' without one
    bitsandbytes: str = ""  # the bitsandbytes the page's environment ran: QLoRA's and 8-bit AdamW's program
    within_text: str = ""  # the error the accuracy counts rows within: '5 %'
    accuracy: tuple[AllocatorAccuracy, ...] = ()
    missing: str = ""  # why there are no answers, where there are none
    simulated_in: str = ""  # the environment whose run simulated the curves
    points: tuple[AccuracyPoint, ...] = ()  # the accuracy chart's rows
    first: tuple[FirstLine, ...] = ()  # each config's answers on the likely card, first on the page
    card: str = ""  # that card: '24 GiB'
    legend: tuple[tuple[str, str], ...] = ()  # (set-up, precision and recipe) for every set-up the tables show
    calculator: CalculatorData | None = None  # the curves and rules for the HTML page's calculator
    sharded: "ShardedSection | None" = None  # a large config on several cards (report/sharded.py)
    imports: str = ""  # what the CPU columns leave out: the interpreter and its imports ('267 MiB'), if measured
    imports_within_margin: bool = False  # whether they fit inside the margin of the smallest CPU budget
    gpu_line: str = ""  # which GPU figures are simulated and which a device confirmed (report/gpu_validation.py)
    context_measured: str = ""  # the context a device measured, beside the allowance ('' without one)
    between: BetweenText | None = None  # what an answer between simulated batches reads (report/between.py)
    validated: tuple[tuple[str, ...], ...] = ()  # (model, row, simulated, measured on the device, error)
    checked: tuple[tuple[str, ...], ...] = ()  # (model, row at the answer's batch, the cap, what happened)
    device_name: str = ""  # the device that validated them
    published_page: bool = False  # the site has the page of published GPU figures (published.md)


def percent(share: float) -> str:
    """'31 %': a whole percent, spaced as the pages write it."""
    return f"{share:.0%}".replace("%", " %")


def _error(value: int, measured: int) -> str:
    return signed_percent((value - measured) / measured)


def _share(value: float) -> str:
    return "–" if math.isnan(value) else f"{value * 100:.1f} %"


def judged_view(row: Judged) -> JudgedRow:
    spread = f" ({mib_range(row.low_bytes, row.high_bytes)})" if row.high_bytes > row.low_bytes else ""
    held_out = row.out_of_sample_bytes
    def against(predicted: int) -> str:
        return f"{format_mib(predicted)} ({_error(predicted, row.measured_bytes)})"

    return JudgedRow(model=row.model, row=row.row,
                     measured=format_mib(row.measured_bytes) + spread, tensor=against(row.tensor_bytes),
                     in_sample=against(row.in_sample_bytes), out_of_sample=against(held_out) if held_out else "–")


def accuracy_views(judged: dict[str, Accuracy | None]) -> tuple[AllocatorAccuracy, ...]:
    """Each allocator's judged rows, out of sample beside in sample."""
    views = []
    for allocator, found in judged.items():
        if found is None:
            continue
        views.append(AllocatorAccuracy(
            allocator=allocator, rows=tuple(judged_view(row) for row in found.rows),
            judged=len(found.errors()), within_5=found.within(WITHIN), median_error=_share(found.median_abs()),
            worst_error=_share(found.worst_abs()), in_sample_median=_share(found.median_abs(False)),
            in_sample_worst=_share(found.worst_abs(False)),
            margin=percent(found.margin) if found.margin is not None else "",
            exceeded=found.exceeded(found.margin) if found.margin is not None else 0))
    return tuple(views)


# The cards and CPU machines the page answers (answers/fit.py), each group of cards a table narrow enough for a
# desktop column; on a GPU the stated margin.


def site_budgets(cpu_margin: float) -> tuple[Budget, ...]:
    """The cards the site answers for, then two CPU machines' memory."""
    gpus = tuple(Budget(f"{gib} GiB GPU", gib * GIB, "gpu", STATED_MARGIN, f"On a GPU of {group[0]} to {group[-1]} GiB")
                 for group in GPU_GROUPS_GIB for gib in group)
    return (*gpus, *(Budget(f"{gib} GiB CPU", gib * GIB, "cpu", cpu_margin, "On a CPU") for gib in CPU_BUDGETS_GIB))


def site_answers(table: FitTable, process: ProcessModel, budgets: tuple[Budget, ...],
                 qlora_ppm: int = PPM) -> list[tuple[Budget, FitAnswer]]:
    """Every curve's answer for every budget (answers/from_curve.py, the rule `fit` reads a curve by): a GPU's
    with the simulated allocator (and QLoRA's allowance, ``qlora_ppm``, on a 4-bit set-up's reserve), a CPU's with
    this page's process model."""
    return [(budget, curve_answer(curve, budget.target, usable_bytes(budget.n_bytes, budget.margin), process,
                                  qlora_ppm, budget_bytes=budget.n_bytes))
            for curve in table.curves for budget in budgets]


def _table(mine: list[tuple[Budget, FitAnswer]], group: str) -> BudgetTable:
    """A row per way of running the config, a column per budget of one group."""
    by_key = {(answer.kind, budget.label): answer for budget, answer in mine}
    labels = tuple(dict.fromkeys(budget.label for budget, _ in mine if budget.group == group))
    return BudgetTable(heading=group, labels=labels,
                       rows=tuple((kind, *(cell(by_key[(kind, label)]) for label in labels))
                                  for kind in dict.fromkeys(answer.kind for _, answer in mine)))


def model_views(answers: list[tuple[Budget, FitAnswer]]) -> tuple[FitModelView, ...]:
    """A table per group of budgets for each config, a row per way of running it, a column per budget."""
    models = []
    for name in dict.fromkeys(answer.model for _, answer in answers):
        mine = [(budget, answer) for budget, answer in answers if answer.model == name]
        groups = dict.fromkeys(budget.group for budget, _ in mine)
        models.append(FitModelView(name=name, parameters_text=f"{mine[0][1].parameters:,}",
                                   tables=tuple(_table(mine, group) for group in groups)))
    return tuple(models)


def build_fit_page(table: FitTable | None, results: list[RowResult], process: ProcessModel,
                   environment: str, libraries: str, recorded: tuple[RecordedCurves, ...] = (),
                   qlora_ppm: int = PPM, bitsandbytes: str = "") -> FitPageContext:
    """The page: answers from the curves, for GPU budgets with the simulated allocator and for CPU budgets
    with this environment's process model and validated band, and the accuracy tables; where no curves were
    simulated under this environment's library versions, a line that says so."""
    judged = {allocator: accuracy(results, allocator) for allocator in ALLOCATORS}  # each fitted once
    checked = accuracy_views(judged)
    band = judged[DEFAULT_ALLOCATOR]
    validated = band is not None and band.margin is not None
    cpu_margin = band.margin if band is not None and band.margin is not None else STATED_MARGIN
    budgets = site_budgets(cpu_margin)
    answers = site_answers(table, process, budgets, qlora_ppm) if table is not None else []
    baseline = next((r for r in results if r.row.mode == Mode.BASELINE and r.summary.ok
                     and r.row.allocator == DEFAULT_ALLOCATOR), None)
    missing = "" if table is not None else (f"No simulated curves under {libraries} yet: `memory-budget refresh` "
                                            "(part of `nox -s measure`) records them.")
    return FitPageContext(title="Will it fit? Simulated answers for the shipped configs",
                          environment=environment, seq_len_text=f"{table.seq_len:,}" if table else "",
                          process_model=process.describe(), budgets=budgets, models=model_views(answers),
                          gpu_margin_text=percent(STATED_MARGIN),
                          cpu_margin_text=percent(cpu_margin) + (" (the band validated below)" if validated
                                                                 else " (no band validated: one model measured)"),
                          context_allowance=format_mib(CUDA_CONTEXT_BYTES), context_source=context_allowance_source(),
                          gpu_rules=cuda_rules(),
                          within_text=percent(WITHIN), accuracy=checked, missing=missing,
                          simulated_in=table.environment if table else "", points=accuracy_points(judged),
                          first=first_lines([answer for budget, answer in answers if budget.target == "gpu"
                                             and budget.n_bytes == EXAMPLE_CARD_BYTES], cell),
                          card=card_text(), legend=legend([answer.kind for _, answer in answers]),
                          calculator=calculator_data(table, recorded, process,
                                                     {"gpu": STATED_MARGIN, "cpu": cpu_margin},
                                                     tuple(gib for group in GPU_GROUPS_GIB for gib in group),
                                                     EXAMPLE_CARD_BYTES // GIB, qlora_ppm) if table else None,
                          qlora_allowance=f"x{qlora_ppm / PPM:.3f}" if qlora_ppm != PPM else "",
                          bitsandbytes=bitsandbytes,
                          between=between_text(table, recorded, [answer for budget, answer in answers
                                                                 if budget.target == "gpu"]) if table else None,
                          imports=format_mib(baseline.summary.baseline_bytes) if baseline else "",
                          imports_within_margin=baseline is not None and baseline.summary.baseline_bytes
                          <= cpu_margin * min(CPU_BUDGETS_GIB) * GIB)
