"""What a "will it fit?" answer is: the largest batch of a set-up within a budget, what a budget must hold for a
row on each target, and the one search for that batch over any peak(batch): predict gives it simulated peaks
(generator/predict/fit.py), the fit page and the sharded section give it recorded curves."""

from collections.abc import Callable
from dataclasses import dataclass

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.answers.published import PPM, allowed
from generator.budget import ProcessModel
from generator.store.records import CpuPart, CudaPart, Prediction

# The budgets the site answers, and its calculator offers: cards in two groups (a consumer card's 8 to 24 GiB; the
# A100 40 GiB, A100 and H100 80 GiB, L40S 48 GiB), and two CPU machines' memory; on a GPU a stated margin, as the
# allocator model is not validated on a device
GPU_GROUPS_GIB = ((8, 12, 16, 24), (40, 48, 80))
CPU_BUDGETS_GIB = (32, 64)
STATED_MARGIN = 0.10  # kept free of a budget where no band was validated: every GPU answer's, the site's


def usable_bytes(budget: int, margin: float) -> int:
    """The usable-budget rule, in its one home: what an answer may fill of a budget with the margin kept free. (The
    CUDA context is part of each GPU figure, card_needs, not taken off the budget; the calculator applies the
    margins the page emits, report/calculator.py.)"""
    return round(budget * (1 - margin))
SHARDED_CARD_GIB = 80  # the card the sharded section answers for (an A100 or H100 80 GiB)


@dataclass(frozen=True)
class FitAnswer:
    """The largest batch of one kind that fits a budget, with the predictions either side of the edge."""

    kind: str
    row: str  # the row at the answer (or at batch 1 when nothing fits)
    batch: int  # 0: not even batch 1 fits
    predicted_bytes: int  # net peak (CPU) or reserve plus context (GPU) at that batch (batch 1 if none fits)
    next_bytes: int  # at batch + 1; 0 when the search stopped at the largest batch the tool allows
    usable_bytes: int
    simulations: int
    model: str = ""
    parameters: int = 0
    budget_bytes: int = 0
    error: str = ""  # why this kind could not be simulated ('' when it was)
    allowance_ppm: int = PPM  # the allowance on the simulated reserve in the peaks (QLoRA's on a GPU), per million
    host_bytes: int = 0  # on a GPU, the host memory beside the card at that batch (paged state, offloaded
    # activations: generator/predict/exact/cuda_program.py), which the card's figure leaves out
    past_curve: bool = False  # read from a curve whose every simulated batch fits, short of the batch limit
    read_from: str = ""  # the curves' file where the answer was read from one (answers/from_curve.py), not simulated


def card_needs(reserved_bytes: int, allowance_ppm: int = PPM) -> int:
    """What a card must hold for a simulated reserve: the reserve, with an allowance on it where one is given
    (QLoRA's, from the published peaks: answers/published.py), plus the stated context allowance (the CPU's
    process overhead does not carry over)."""
    return allowed(reserved_bytes, allowance_ppm) + CUDA_CONTEXT_BYTES


def needs(target: str, tensor_bytes: int, reserved_bytes: int, model: ProcessModel, allowance_ppm: int = PPM) -> int:
    """What a budget must hold, the one rule every answer uses: on a CPU the process peak net of imports (the
    tensor peak through the process model); on a GPU what the card needs for the caching allocator's simulated
    reserve (card_needs), with QLoRA's allowance where the row is QLoRA's (a CPU's QLoRA is measured exact)."""
    return card_needs(reserved_bytes, allowance_ppm) if target.startswith("gpu") else model.expected(tensor_bytes)


def expected_peak(prediction: Prediction | CpuPart | CudaPart, model: ProcessModel, target: str,
                  allowance_ppm: int = PPM) -> int:
    """needs() for a simulated row, reading only what the target needs, so that one program's part answers:
    a GPU's reserve ("gpu-expandable": with expandable segments), else the CPU's tensor peak."""
    if target.startswith("gpu"):
        reserved = getattr(prediction, "cuda_expandable_bytes" if target == "gpu-expandable" else "cuda_reserved_bytes")
        return needs(target, 0, reserved, model, allowance_ppm)
    return needs(target, prediction.tensor_peak_bytes, 0, model)  # type: ignore[union-attr]


# The search below, in words: a curve recorded for the site holds the batches it asks at each card, so a curve
# pinned by another search is stale (generator/predict/curves.py is_current)
SEARCH = "batches 2 and 3 propose by their line (batch 1 only where batch 2 does not fit), then interpolation"


def search_text(qlora_ppm: int = PPM) -> str:
    """The search a curve's batches were asked by: SEARCH, and QLoRA's allowance where it moved the GPU edges."""
    return SEARCH if qlora_ppm == PPM else f"{SEARCH}; QLoRA's GPU reserve with its allowance, {qlora_ppm:,} ppm"


def largest_batch(peak: Callable[[int], int], usable: int, limit: int) -> int:
    """The largest batch b in 1..limit with peak(b) <= usable (0 when not even batch 1 fits), for a peak that
    grows with the batch, asking for as few peaks as it can (each may be a simulation): peaks are close to
    linear in the batch, so the line through batches 2 and 3 proposes a batch, and the search then brackets
    the answer, interpolating, and bisecting once after a guess that left more than half the bracket.

    Batch 1 is asked only where batch 2 does not fit. A dimension of one takes other paths (a copy skipped, a
    view kept), so a simulation reads batches 2 and up from one line (generator/predict/fast/batches.py), where batch
    1 costs a simulation of its own at three or four small depths (generator/predict/fast/depth.py). Where a peak is
    not monotone in the batch (a simulated GPU reserve can dip), the edge the search finds depends on the batches
    it asks: SEARCH names them, and a curve pinned by another search is simulated again."""
    if limit < 2 or peak(2) > usable:
        return 1 if peak(1) <= usable else 0
    fits, too_big = 2, limit + 1  # the largest batch known to fit, the smallest known not to
    if limit >= 3:  # the line through batches 2 and 3 proposes the first batch to try
        slope = max(peak(3) - peak(2), 1)
        first = min(max(2 + (usable - peak(2)) // slope, 3), limit)
        fits, too_big = (first, too_big) if peak(first) <= usable else (fits, first)
        if fits == first < limit and peak(first + 1) > usable:  # on a straight line, the proposal is the answer
            too_big = first + 1
    return narrow(peak, fits, too_big, usable, limit)


def narrow(peak: Callable[[int], int], fits: int, too_big: int, usable: int, limit: int) -> int:
    """The largest batch that fits, from a bracket: ``fits`` is known to fit, ``too_big`` not to (or is limit
    + 1); interpolating, and bisecting once after a guess that left more than half the bracket."""
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
    return fits


def _interpolate(fits: int, fits_peak: int, too_big: int, too_big_peak: int | None, usable: int) -> int:
    """The next batch to try, strictly between the two: where the line through the known peaks meets the
    budget, when there is such a line, else the midpoint (or double, while no batch is known not to fit)."""
    if too_big_peak is not None and too_big_peak > fits_peak:
        guess = fits + (usable - fits_peak) * (too_big - fits) // (too_big_peak - fits_peak)
    else:
        guess = min(fits * 2, (fits + too_big) // 2) if too_big_peak is None else (fits + too_big) // 2
    return min(max(guess, fits + 1), too_big - 1)


def on_simulated(batch: int, simulated: tuple[int, ...], peak: Callable[[int], int], usable: int) -> int:
    """An answer read from a curve, settled on a simulated batch: the largest simulated batch at or below the
    search's answer whose peak fits (0 where none does). A simulated GPU reserve is not convex in the batch, so
    between two simulated batches the chord can lie below the reserve and name a batch that does not fit; at a
    card whose fit batches the curve holds, the search's answer is already a simulated batch."""
    return max((b for b in simulated if b <= batch and peak(b) <= usable), default=0)


def answer_within(kind: str, row: str, peak: Callable[[int], int], usable: int, limit: int,
                  simulated: tuple[int, ...] | None = None, **context: str | int) -> FitAnswer:
    """The answer for one set-up: the largest batch (settled on a ``simulated`` batch where they are given:
    on_simulated), its row (``row`` with {b} to fill) and the peaks either side of the edge (at batch 1 when
    nothing fits); ``context`` fills the answer's other fields."""
    batch = largest_batch(peak, usable, limit)
    batch = batch if simulated is None else on_simulated(batch, simulated, peak, usable)
    shown = max(batch, 1)
    following = peak(batch + 1) if batch < limit else 0
    return FitAnswer(kind=kind, row=row.format(b=shown), batch=batch, predicted_bytes=peak(shown),
                     next_bytes=following, usable_bytes=usable, **{"simulations": 0, **context})  # type: ignore[arg-type]
