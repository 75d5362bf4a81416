"""`fit`: the largest batch that fits a memory budget, by simulation, for each way of running a model.

Predicted memory is close to linear in the batch (fixed costs plus a per-sequence cost), so two simulations
place a line, the line proposes a batch, and a few more simulations confirm it: the answer's prediction is
within the usable budget and the next batch's is not. The usable budget is the budget less a safety margin
for what the simulation does not see (the allocator's fragmentation, a GPU's context and workspaces)."""

from collections.abc import Callable

from generator.budget import ProcessModel
from generator.escaping import one_line_error
from generator.matrix import MAX_BATCH, MAX_TOKENS_PER_STEP, RowSpec, parse_row
from generator.model_source import ModelError, ModelSource
from generator.predict.simulate import simulate
from generator.store.fit_table import FitAnswer

DEFAULT_MARGIN = 0.10
KINDS = {  # what a person asks about -> the row that answers it, with {b} the batch and {s} the length
    "inference": "infer-b{b}-s{s}",
    "full training": "train-b{b}-s{s}",
    "gradient checkpointing": "train-b{b}-s{s}-ckpt",
    "16-bit training": "train-b{b}-s{s}-bf16",
    "LoRA": "train-b{b}-s{s}-lora8",
}


class Predictor:
    """Expected process peaks of one model's rows, each simulated once."""

    def __init__(self, source: ModelSource, model: ProcessModel,
                 simulator: Callable[[RowSpec, ModelSource], object] = simulate) -> None:
        self.source, self.model, self.simulator = source, model, simulator
        self.cache: dict[str, int] = {}

    def peak(self, row_id: str) -> int:
        """The expected process peak of a row, net of imports."""
        if row_id not in self.cache:
            prediction = self.simulator(parse_row(row_id), self.source)
            self.cache[row_id] = self.model.expected(prediction.tensor_peak_bytes)  # type: ignore[attr-defined]
        return self.cache[row_id]


def largest_batch(predictor: Predictor, kind: str, seq_len: int, usable: int) -> FitAnswer:
    """Search the largest batch whose prediction is within the usable budget."""
    template, limit = KINDS[kind], min(MAX_BATCH, MAX_TOKENS_PER_STEP // seq_len)
    before = len(predictor.cache)

    def peak(batch: int) -> int:
        return predictor.peak(template.format(b=batch, s=seq_len))

    def answer(batch: int) -> FitAnswer:
        shown = max(batch, 1)
        following = peak(batch + 1) if batch < limit else 0
        return FitAnswer(kind=kind, row=template.format(b=shown, s=seq_len), batch=batch,
                         predicted_bytes=peak(shown), next_bytes=following, usable_bytes=usable,
                         simulations=len(predictor.cache) - before)

    if peak(1) > usable:
        return answer(0)
    fits, too_big = 1, limit + 1  # the largest batch known to fit, the smallest known not to
    if limit >= 2:  # the line through batches 1 and 2 proposes the first batch to try
        slope = max(peak(2) - peak(1), 1)
        first = min(max(1 + (usable - peak(1)) // slope, 2), limit)
        fits, too_big = (first, too_big) if peak(first) <= usable else (fits, first)
        if fits == first < limit and peak(first + 1) > usable:  # on a straight line, the proposal is the answer
            too_big = first + 1
    halve = False  # after a guess that left more than half the bracket, bisect once (the Illinois idea)
    while too_big - fits > 1:
        width = too_big - fits
        guess = (fits + too_big) // 2 if halve else _interpolate(
            fits, peak(fits), too_big, peak(too_big) if too_big <= limit else None, usable)
        if peak(guess) <= usable:
            fits = guess
        else:
            too_big = guess
        halve = too_big - fits > width // 2
    return answer(fits)


def _interpolate(fits: int, fits_peak: int, too_big: int, too_big_peak: int | None, usable: int) -> int:
    """The next batch to try, strictly between the two: where the line through the known peaks meets the
    budget, when there is such a line, else the midpoint (or double, while no batch is known not to fit)."""
    if too_big_peak is not None and too_big_peak > fits_peak:
        guess = fits + (usable - fits_peak) * (too_big - fits) // (too_big_peak - fits_peak)
    else:
        guess = min(fits * 2, (fits + too_big) // 2) if too_big_peak is None else (fits + too_big) // 2
    return min(max(guess, fits + 1), too_big - 1)


def answer_or_reason(predictor: Predictor, kind: str, seq_len: int, usable: int) -> FitAnswer:
    """largest_batch, or for a kind that cannot be simulated (no LoRA targets for the architecture, say) an
    answer that carries the reason, so that the other kinds still answer."""
    try:
        return largest_batch(predictor, kind, seq_len, usable)
    except ModelError:
        raise  # the config itself cannot be built: bad input, not one kind's failure
    except Exception as error:  # torch, transformers and peft fail with exceptions of many types
        return FitAnswer(kind=kind, row=KINDS[kind].format(b=1, s=seq_len), batch=0, predicted_bytes=0,
                         next_bytes=0, usable_bytes=usable, simulations=0, error=one_line_error(error))


def fit(predictor: Predictor, seq_len: int, budget: int, margin: float = DEFAULT_MARGIN,
        kinds: tuple[str, ...] = tuple(KINDS)) -> list[FitAnswer]:
    """Every kind's answer for one budget."""
    usable = round(budget * (1 - margin))
    return [answer_or_reason(predictor, kind, seq_len, usable) for kind in kinds]
