"""What the fit page says of an answer between simulated batches, computed from the curves it reads: whether
the tensor peaks (the CPU's answers read their chord) and the simulated GPU reserves are convex at their
simulated batches, by how much they are not, and how many of the tables' GPU answers sit on simulated batches
at both sides of the edge (the answer and the batch after it), which makes them `fit --target gpu`'s own."""

from collections.abc import Sequence
from dataclasses import dataclass

from generator.answers.fit import FitAnswer
from generator.answers.setups import setup_name
from generator.matrix import batch_limit
from generator.report.calculator import offered
from generator.store.fit_table import Curve, FitTable, chord
from generator.store.recorded_curves import RecordedCurves
from generator.units import format_mib


def above_chord(batches: Sequence[int], values: Sequence[int]) -> int:
    """How far, in bytes, a simulated batch lies above the chord of its two neighbours at most; 0 where the
    curve is convex at its simulated batches."""
    return max((values[i] - chord((batches[i - 1], batches[i + 1]), (values[i - 1], values[i + 1]), batches[i])
                for i in range(1, len(batches) - 1)), default=0)


def _bent(curves: Sequence[Curve], field: str) -> tuple[int, int]:
    found = [above_chord(curve.batches, getattr(curve, field)) for curve in curves]
    return sum(1 for excess in found if excess > 0), max(found, default=0)


def cpu_between(curves: Sequence[Curve]) -> str:
    """The sentence on a CPU answer between simulated batches, which reads the chord of the tensor peaks."""
    bent, worst = _bent(curves, "tensor_bytes")
    if bent == 0:
        return (f"every one of the {len(curves):,} tensor-peak curves here is convex at its simulated batches, as "
                "the largest of the steps' live bytes, each growing linearly with the batch, must be; between them "
                "the chord lies on or above the curve, and a CPU answer errs, if at all, towards a smaller batch")
    return (f"{bent:,} of the {len(curves):,} tensor-peak curves here are not convex at their simulated batches "
            f"(a batch up to {format_mib(worst)} above its neighbours' chord), so between simulated batches a CPU "
            "answer on those can err either way")


def gpu_between(curves: Sequence[Curve]) -> str:
    """The sentence on a GPU answer between simulated batches, which is settled on a simulated batch."""
    bent, worst = _bent(curves, "cuda_bytes")
    shape = (f"simulated GPU reserves are not convex in the batch (in {bent:,} of the {len(curves):,} curves a "
             f"simulated batch lies above its neighbours' chord, by up to {format_mib(worst)}), so the chord can "
             "name a batch whose reserve does not fit" if bent else
             f"the {len(curves):,} simulated GPU reserve curves are convex at their simulated batches, but "
             "nothing says they are between them")
    return (f"{shape}; a GPU answer is therefore the largest simulated batch, at or below the chord's answer, "
            "whose reserve fits")


def pinned(answers: Sequence[FitAnswer], curves: Sequence[Curve]) -> tuple[int, int]:
    """How many GPU answers have their batch and the batch after it simulated (or are the tool's largest batch,
    or do not fit at batch 1), out of how many: those are the search's own answers, read off the curve."""
    by_key = {(curve.model, setup_name(curve.setup)): curve for curve in curves}  # an answer names its set-up
    held = 0
    for answer in answers:
        curve = by_key[(answer.model, answer.kind)]
        edge = {answer.batch, answer.batch + 1} - {0, batch_limit(curve.seq_len) + 1}
        held += edge <= set(curve.batches)
    return held, len(answers)


@dataclass(frozen=True)
class BetweenText:
    """The fit page's sentences on answers between simulated batches: the CPU's, the GPU's, and the tables'."""

    cpu: str
    gpu: str
    tables: str


def between_text(table: FitTable, recorded: tuple[RecordedCurves, ...],
                 gpu_answers: Sequence[FitAnswer]) -> BetweenText:
    """The sentences, over every curve the page and its calculator read, and the tables' GPU answers."""
    curves = offered(table, recorded)
    held, total = pinned(gpu_answers, table.curves)
    tables = (f"at every card listed the curves hold the batch fit's search finds and the one after it (all "
              f"{total:,} GPU answers in these tables), so the tables give its answers" if held == total else
              f"at the cards listed the curves hold the batch fit's search finds and the one after it for "
              f"{held:,} of the {total:,} GPU answers in these tables; the others can be smaller than fit's")
    return BetweenText(cpu=cpu_between(curves), gpu=gpu_between(curves), tables=tables)
