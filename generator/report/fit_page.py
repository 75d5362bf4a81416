"""The fit page's context: the simulated answers of `fit --record` (measurements/<env>/_fit.toml), a table
per shipped config with a column per budget. Frozen and typed; the template places values only."""

from dataclasses import dataclass

from generator.budget import ProcessModel
from generator.store.fit_table import FitAnswer, FitTable
from generator.store.records import RowResult
from generator.units import format_gib, format_mib, mib_range, signed_percent


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
        if prediction is None or not summary.ok or result.row.memory_limit_bytes or not summary.net_peak_bytes:
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


def build_fit_page(table: FitTable, results: list[RowResult] | None = None,
                   process: ProcessModel | None = None) -> FitPageContext:
    """One table per config, in the order fit --record wrote them."""
    budgets = tuple(dict.fromkeys(answer.budget_bytes for answer in table.answers))
    models = []
    for name in dict.fromkeys(answer.model for answer in table.answers):
        answers = [answer for answer in table.answers if answer.model == name]
        kinds = dict.fromkeys(answer.kind for answer in answers)
        by_key = {(answer.kind, answer.budget_bytes): answer for answer in answers}
        rows = tuple((kind, *(cell(by_key[(kind, budget)]) for budget in budgets)) for kind in kinds)
        models.append(FitModelView(name=name, parameters_text=f"{answers[0].parameters:,}", rows=rows))
    checked = accuracy(results or [], process) if process is not None else ()
    worst = max((abs(row.predicted_error_value) * 100 for row in checked), default=0.0)
    return FitPageContext(title="Will it fit? Simulated answers for the shipped configs",
                          environment=table.environment, seq_len_text=f"{table.seq_len:,}",
                          margin_text=f"{table.margin:.0%}", process_model=table.process_model,
                          budgets=tuple(format_gib(b, 0) for b in budgets), models=tuple(models),
                          accuracy=checked, worst_error=f"{worst:.1f} %" if checked else "")
