"""The fit page's context: a table per shipped config with a column per budget, answered at build time from
the simulated curves (generator/store/fit_table.py) and this environment's process model, beside the accuracy
of the predictions on the measured rows. Frozen and typed; the template places values only."""

from dataclasses import dataclass

from generator.budget import ProcessModel, largest_batch
from generator.matrix import MAX_BATCH, MAX_TOKENS_PER_STEP
from generator.store.fit_table import Curve, FitAnswer, FitTable
from generator.store.records import RowResult
from generator.units import GIB, format_gib, format_mib, mib_range, signed_percent


@dataclass(frozen=True)
class FitModelView:
    """One config: a row per way of running it, a cell per budget."""

    name: str
    parameters_text: str
    rows: tuple[tuple[str, ...], ...]  # (kind, cell, cell, ...)


@dataclass(frozen=True)
class AccuracyRow:
    """A measured row against its prediction: how far to trust the answers above."""

    model: str
    row: str
    measured: str  # median, with the spread of the independent repeats
    tensor: str
    tensor_error: str
    predicted: str
    predicted_error: str
    predicted_error_value: float


@dataclass(frozen=True)
class FitPageContext:
    """Everything fit.md.j2 places."""

    title: str
    environment: str
    seq_len_text: str
    margin_text: str
    process_model: str
    budgets: tuple[str, ...]
    models: tuple[FitModelView, ...]
    accuracy: tuple[AccuracyRow, ...] = ()
    worst_error: str = ""  # the largest |predicted − measured| / measured over the accuracy rows
    missing: str = ""  # why there are no answers, where there are none
    simulated_in: str = ""  # the environment whose run simulated the curves


def cell(answer: FitAnswer) -> str:
    """'batch 12 (21.3 GiB)' or 'does not fit (batch 1: 31.0 GiB)'."""
    if answer.batch == 0:
        return f"does not fit (batch 1: {format_gib(answer.predicted_bytes)})"
    return f"batch {answer.batch} ({format_gib(answer.predicted_bytes)})"


def _error(value: int, measured: int) -> str:
    return signed_percent((value - measured) / measured)


def accuracy(results: list[RowResult], process: ProcessModel) -> tuple[AccuracyRow, ...]:
    """Every finished, uncapped row that carries a prediction, measured against predicted."""
    rows = []
    for result in sorted(results, key=lambda r: (r.model.name, r.row.mode, r.row.tokens_per_step, r.row.id)):
        summary, prediction = result.summary, result.prediction
        if prediction is None or not result.finished or not summary.net_peak_bytes:
            continue
        measured, tensor = summary.net_peak_bytes, prediction.tensor_peak_bytes
        spread = (f" ({mib_range(summary.net_peak_min_bytes, summary.net_peak_max_bytes)})"
                  if summary.net_peak_max_bytes > summary.net_peak_min_bytes else "")
        expected = process.expected(tensor)
        rows.append(AccuracyRow(model=result.model.name, row=result.row.id, measured=format_mib(measured) + spread,
                                tensor=format_mib(tensor), tensor_error=_error(tensor, measured),
                                predicted=format_mib(expected), predicted_error=_error(expected, measured),
                                predicted_error_value=(expected - measured) / measured))
    return tuple(rows)


SITE_BUDGETS_GIB = (16, 24, 48, 80)
SITE_MARGIN = 0.10


def site_answers(table: FitTable, process: ProcessModel, margin: float = SITE_MARGIN) -> list[FitAnswer]:
    """Every curve's answer for every site budget, with this page's process model."""
    limit = min(MAX_BATCH, MAX_TOKENS_PER_STEP // table.seq_len)
    answers = []
    for curve in table.curves:
        def peak(batch: int, curve: Curve = curve) -> int:
            return process.expected(curve.at(batch))
        for gib in SITE_BUDGETS_GIB:
            usable = round(gib * GIB * (1 - margin))
            batch = largest_batch(peak, usable, limit)
            shown = max(batch, 1)
            answers.append(FitAnswer(kind=curve.kind, row=curve.row.format(b=shown), batch=batch,
                                     predicted_bytes=peak(shown), next_bytes=peak(batch + 1) if batch < limit else 0,
                                     usable_bytes=usable, simulations=0, model=curve.model,
                                     parameters=curve.parameters, budget_bytes=gib * GIB))
    return answers


def model_views(answers: list[FitAnswer]) -> tuple[FitModelView, ...]:
    """One table per config, a row per way of running it, a column per budget."""
    budgets = tuple(dict.fromkeys(answer.budget_bytes for answer in answers))
    models = []
    for name in dict.fromkeys(answer.model for answer in answers):
        mine = [answer for answer in answers if answer.model == name]
        by_key = {(answer.kind, answer.budget_bytes): answer for answer in mine}
        rows = tuple((kind, *(cell(by_key[(kind, budget)]) for budget in budgets))
                     for kind in dict.fromkeys(answer.kind for answer in mine))
        models.append(FitModelView(name=name, parameters_text=f"{mine[0].parameters:,}", rows=rows))
    return tuple(models)


def build_fit_page(table: FitTable | None, results: list[RowResult], process: ProcessModel,
                   environment: str, libraries: str) -> FitPageContext:
    """The page: answers from the curves and this environment's process model, and the accuracy table; where
    no curves were simulated under this environment's library versions, a line that says so."""
    answers = site_answers(table, process) if table is not None else []
    checked = accuracy(results, process)
    worst = max((abs(row.predicted_error_value) * 100 for row in checked), default=0.0)
    missing = "" if table is not None else (f"No simulated curves under {libraries} yet: `memory-budget refresh` "
                                            "(part of `nox -s measure`) records them.")
    return FitPageContext(title="Will it fit? Simulated answers for the shipped configs",
                          environment=environment, seq_len_text=f"{table.seq_len:,}" if table else "",
                          margin_text=f"{SITE_MARGIN:.0%}", process_model=process.describe(),
                          budgets=tuple(format_gib(gib * GIB, 0) for gib in SITE_BUDGETS_GIB),
                          models=model_views(answers), accuracy=checked,
                          worst_error=f"{worst:.1f} %" if checked else "", missing=missing,
                          simulated_in=table.environment if table else "")
