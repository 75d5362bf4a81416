"""The article's bitsandbytes section: QLoRA's 4-bit base and 8-bit AdamW, measured, each against the same row
without it on the same machine, with its step time and its prediction judged out of sample.

The rows may come from another environment than the article's (bitsandbytes rows need a CPU with native
bf16); the section names the machine, and compares only rows measured on it."""

import statistics
from dataclasses import dataclass, replace

from generator.answers.accuracy import WITHIN, judged_rows
from generator.matrix import DEFAULT_OPTIMIZER, RowSpec
from generator.quantize import uses_bitsandbytes
from generator.report.views import Figure, Part, figure
from generator.store.records import RowResult
from generator.units import format_mib, signed_percent

FOUR_BIT, EIGHT_BIT = "4-bit NF4 base", "8-bit AdamW"  # the two changes, as the table names them


@dataclass(frozen=True)
class LowBitRow:
    """One bitsandbytes row against the row it changes."""

    model: str
    row: str
    change: str  # "4-bit NF4 base" | "8-bit AdamW"
    against: str  # the same row without the change
    net: Figure
    against_net: Figure
    saving: str  # '−27 %' of the row without it, net of imports
    saved: bool  # whether the change saved memory
    step_seconds: str  # the two steps' median time and range over the repeats, and the row without it's
    against_step_seconds: str
    allocator: str
    weights: str  # simulated: '62 MiB (9 MiB)', the share in brackets quantization constants; '–' if not simulated
    predicted: Figure | None  # out of sample: the process model fitted on the other models' rows
    error_share: float | None  # its error against the measured median
    error: str
    split: tuple[tuple[Part, int], ...] = ()  # the simulated split at its tensor peak, then what the allocator kept
    against_split: tuple[tuple[Part, int], ...] = ()  # the same for the row without the change


@dataclass(frozen=True)
class LowBitSection:
    """Where and how the rows were measured, and the rows."""

    environment: str
    elsewhere: bool  # measured in another environment than the article's
    cpu: str  # the CPU with its features, as the section's text names it
    machine: str  # the CPU alone, as its chart names it
    allocator: str
    rows: tuple[LowBitRow, ...]
    worst_error: str  # the largest out-of-sample error of these rows, as a share
    within: int  # rows predicted within accuracy.WITHIN
    within_text: str  # that share: '5 %'
    judged: int
    costlier_8bit: tuple[str, ...] = ()  # the 8-bit AdamW rows that held more than AdamW, by row id
    median_error: str = "–"  # the median |error| out of sample: '0.3 %'


def _without(row: RowSpec) -> tuple[str, RowSpec]:
    if row.quantization:
        return FOUR_BIT, replace(row, quantization="")
    return EIGHT_BIT, replace(row, optimizer=DEFAULT_OPTIMIZER)


def steps_text(result: RowResult) -> str:
    """The two steps' time: the median over the repeats, with the fastest and slowest in brackets (a machine
    shared with other work shows up as a wide bracket)."""
    times = sorted(sum(r.step_seconds) for r in result.repeats if r.status == "ok" and r.step_seconds)
    if not times:
        return "–"
    median = statistics.median(times)
    return f"{median:.1f} s" + (f" ({times[0]:.1f}–{times[-1]:.1f})" if len(times) > 1 else "")


def _weights(result: RowResult) -> str:
    found = result.prediction
    if found is None:
        return "–"
    constants = f" ({format_mib(found.quantization_bytes)})" \
        if found.quantization_bytes else ""
    return format_mib(found.weights_bytes) + constants


def split(result: RowResult) -> tuple[tuple[Part, int], ...]:
    """A measured row's net peak in slices, from its simulation: weights (the 4-bit layers packed), the
    quantization constants that undo them, gradients, optimizer state and activations at the tensor peak, then
    what the process held beyond the tensors; () where the row carries no simulation."""
    found = result.prediction
    if found is None:
        return ()
    constants = found.quantization_bytes
    parts = [(Part.WEIGHTS, found.weights_bytes - constants), (Part.QUANTIZATION_CONSTANTS, constants),
             (Part.GRADIENTS, found.gradients_bytes), (Part.ADAMW_STATE, found.optimizer_bytes),
             (Part.ACTIVATIONS, found.activations_bytes),
             (Part.KEPT, max(result.summary.net_peak_bytes - found.tensor_peak_bytes, 0))]
    return tuple((name, n_bytes) for name, n_bytes in parts if n_bytes)


def _rows(results: list[RowResult]) -> list[LowBitRow]:
    finished = {(r.model.name, r.row): r for r in results if r.finished}
    allocators = {r.row.allocator for r in finished.values() if uses_bitsandbytes(r.row)}
    judged = {(j.model, j.row): j for a in sorted(allocators) for j in judged_rows(results, a)}
    out = []
    for (model, row), result in sorted(finished.items(), key=lambda item: (item[0][0], item[0][1].id)):
        if not uses_bitsandbytes(row):
            continue
        change, plain = _without(row)
        other = finished.get((model, plain))
        if other is None:
            continue
        net, against = result.summary.net_peak_bytes, other.summary.net_peak_bytes
        found = judged.get((model, row.id))
        predicted = found.out_of_sample_bytes if found is not None and found.out_of_sample_bytes else 0
        out.append(LowBitRow(
            model=model, row=row.id, change=change, against=plain.id, net=figure(net), against_net=figure(against),
            saving=signed_percent(net / against - 1, 0), saved=net < against,
            step_seconds=steps_text(result), against_step_seconds=steps_text(other),
            allocator=row.allocator, weights=_weights(result), predicted=figure(predicted) if predicted else None,
            error_share=predicted / net - 1 if predicted else None,
            error=signed_percent(predicted / net - 1) if predicted else "–",
            split=split(result), against_split=split(other)))
    return out


def low_bit_section(environments: list[list[RowResult]], article: str = "") -> LowBitSection | None:
    """The section from the environment with the most such rows, each with its row without the change; None
    where no environment has one. ``article`` is the article's environment, which the section says it is or
    is not."""
    found = [(len(rows), results) for results in environments if (rows := _rows(results))]
    if not found:
        return None
    _, results = max(found, key=lambda item: (item[0], item[1][0].environment.id))
    rows = _rows(results)
    errors = [r.error_share for r in rows if r.error_share is not None]
    environment = results[0].environment
    return LowBitSection(
        environment=environment.id, elsewhere=environment.id != article,
        cpu=environment.cpu + (f" ({environment.cpu_features})" if environment.cpu_features else ""),
        machine=environment.cpu,
        allocator=", ".join(sorted({r.allocator for r in rows})), rows=tuple(rows),
        worst_error=signed_percent(max(errors, key=abs)) if errors else "–",
        within=sum(abs(e) <= WITHIN for e in errors), within_text=f"{WITHIN:.0%}".replace("%", " %"),
        median_error=f"{statistics.median(abs(e) for e in errors):.1%}".replace("%", " %") if errors else "–",
        judged=len(errors), costlier_8bit=tuple(f"{r.model} {r.row}" for r in rows
                                                 if r.change == EIGHT_BIT and not r.saved))
