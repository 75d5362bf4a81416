"""How well the process model predicts measured rows, judged out of sample, per allocator.

For each allocator, every measured row that carries a simulated tensor peak is predicted twice: by the line
fitted on every row of that allocator (in sample), and by the line fitted on the other models' rows only
(leave one model out: the row's model was never seen). The out-of-sample errors give the band `fit` keeps
free: the largest under-prediction seen, as a share of the budget. Torch-free: `build` reads it too."""

import math
import statistics
from dataclasses import dataclass

from generator.budget import ProcessModel, process_model
from generator.matrix import Mode, RowSpec
from generator.store.records import RowResult

WITHIN = 0.05  # the error the pages count rows within
MIN_MARGIN = 0.02  # kept free even when no row was ever under-predicted: two repeats' spread


@dataclass(frozen=True)
class Judged:
    """One measured row against its predictions."""

    model: str
    row: str
    allocator: str
    tensor_bytes: int
    measured_bytes: int  # the median of its independent repeats, net of imports
    low_bytes: int
    high_bytes: int
    in_sample_bytes: int
    out_of_sample_bytes: int  # 0 where no other model has rows to fit on

    @property
    def in_sample_error(self) -> float:
        return self.in_sample_bytes / self.measured_bytes - 1

    @property
    def out_of_sample_error(self) -> float | None:
        return self.out_of_sample_bytes / self.measured_bytes - 1 if self.out_of_sample_bytes else None


@dataclass(frozen=True)
class Accuracy:
    """Every judged row of one allocator, and what they say."""

    allocator: str
    rows: tuple[Judged, ...]
    margin: float | None  # what fit keeps free so that no judged row would have run over its budget; None
    # where no row could be judged out of sample (a single model measured): no band is validated

    def errors(self, out_of_sample: bool = True) -> list[float]:
        found = [r.out_of_sample_error if out_of_sample else r.in_sample_error for r in self.rows]
        return [error for error in found if error is not None]

    def median_abs(self, out_of_sample: bool = True) -> float:
        errors = self.errors(out_of_sample)
        return statistics.median(abs(e) for e in errors) if errors else math.nan

    def worst_abs(self, out_of_sample: bool = True) -> float:
        return max((abs(e) for e in self.errors(out_of_sample)), default=math.nan)

    def within(self, share: float, out_of_sample: bool = True) -> int:
        return sum(abs(e) <= share for e in self.errors(out_of_sample))

    def exceeded(self, margin: float) -> int:
        """Rows whose median measurement is over the budget at which fit would have just allowed them."""
        return sum(r.measured_bytes > r.out_of_sample_bytes / (1 - margin) for r in self.rows if r.out_of_sample_bytes)


def _pairs(results: list[RowResult]) -> list[tuple[int, int]]:
    return [(r.prediction.tensor_peak_bytes, r.summary.net_peak_bytes) for r in results if r.prediction]


def judged_rows(results: list[RowResult], allocator: str) -> tuple[Judged, ...]:
    """Every finished, predicted row of the allocator, predicted in and out of sample."""
    rows = [r for r in results if r.prediction is not None and r.finished and r.row.allocator == allocator]
    everything = process_model(_pairs(rows), allocator)
    by_model: dict[str, ProcessModel] = {}
    for name in {r.model.name for r in rows}:
        others = [r for r in rows if r.model.name != name]
        by_model[name] = process_model(_pairs(others), f"{allocator} without {name}")
    return tuple(_judged(r, allocator, everything, by_model[r.model.name])
                 for r in sorted(rows, key=lambda r: (r.model.name, r.row.tokens_per_step, r.row.id)))


def _judged(r: RowResult, allocator: str, in_sample: ProcessModel, held_out: ProcessModel) -> Judged:
    """One measured row against the two lines' predictions (out of sample 0 where the held-out line is none)."""
    tensor = r.prediction.tensor_peak_bytes  # type: ignore[union-attr]
    return Judged(model=r.model.name, row=r.row.id, allocator=allocator, tensor_bytes=tensor,
                  measured_bytes=r.summary.net_peak_bytes, low_bytes=r.summary.net_peak_min_bytes,
                  high_bytes=r.summary.net_peak_max_bytes, in_sample_bytes=in_sample.expected(tensor),
                  out_of_sample_bytes=0 if held_out.source.startswith("no overhead") else held_out.expected(tensor))


def band(rows: tuple[Judged, ...]) -> float | None:
    """The margin to keep free, rounded up to a whole percent: with m ≥ u / (1 + u) for the largest
    out-of-sample under-prediction u, predicted ≤ budget × (1 − m) implies measured ≤ budget."""
    judged = [r.measured_bytes / r.out_of_sample_bytes - 1 for r in rows if r.out_of_sample_bytes]
    if not judged:
        return None
    under = max(judged)
    needed = under / (1 + under) if under > 0 else 0.0
    return max(math.ceil(needed * 100 - 1e-9) / 100, MIN_MARGIN)


def accuracy(results: list[RowResult], allocator: str) -> Accuracy | None:
    """The allocator's judged rows and band; None where it has no predicted rows."""
    rows = judged_rows(results, allocator)
    return Accuracy(allocator, rows, band(rows)) if rows else None


def _plain(row: RowSpec) -> bool:
    """A full fine-tune with nothing turned on: fp32, torch's AdamW, no checkpointing, LoRA or saver."""
    return row == RowSpec(Mode.TRAIN, row.batch_size, row.seq_len, allocator=row.allocator)


def judged_on_plain_rows(results: list[RowResult], allocator: str) -> tuple[Judged, ...]:
    """Each finished, predicted training row of the allocator that is not a plain full fine-tune (a memory saver,
    coordinates.savers; LoRA or QLoRA with checkpointing), predicted by the process model fitted on the same
    results' plain full fine-tunes only (never the judged rows): its out-of-sample figure. Nothing where fewer
    than three plain rows were measured."""
    rows = [r for r in results if r.prediction is not None and r.finished and r.row.allocator == allocator
            and r.row.mode == Mode.TRAIN]
    fitted = process_model(_pairs([r for r in rows if _plain(r.row)]), f"{allocator}, plain full fine-tunes")
    if fitted.source.startswith("no overhead"):
        return ()
    return tuple(_judged(r, allocator, fitted, fitted)
                 for r in sorted((r for r in rows if not _plain(r.row)), key=lambda r: (r.model.name, r.row.id)))
