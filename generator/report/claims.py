"""The article's sentences that state a direction or a size, each decided by the data: what 16-bit halves, how
much of the activations one copy of the logits is, whether tokens or the length drive activations, and which fix
a large model should try first. Each returns None where its rows are missing, and the template words the sentence
from the fields here, never from a fixed claim."""

from dataclasses import dataclass
from enum import StrEnum

from generator.budget import fixed_costs
from generator.matrix import Mode, parse_row
from generator.report.views import Figure, Part, Ratio, RowView, figure, share, signed
from generator.store.fit_table import FitTable
from generator.units import format_gib

HALVES = -0.45  # a change of −45 % or more reads as "halves"; anything smaller is stated as its own size
FIXED_ARRAYS = (Part.WEIGHTS, Part.GRADIENTS, Part.ADAMW_STATE)


def fixed_bytes(row: RowView) -> int:
    """Weights, gradients and AdamW state of a row: its P-sized arrays."""
    return sum(c.n_bytes for c in row.components if c.name in FIXED_ARRAYS)


class Direction(StrEnum):
    """Which way a figure moves: the name logic compares; DIRECTION_WORDS says it in the article's words."""

    FALL = "fall"
    RISE = "rise"
    LEVEL = "level"


DIRECTION_WORDS = {Direction.FALL: "fall", Direction.RISE: "rise", Direction.LEVEL: "stay level"}


def _direction(change: float) -> Direction:
    return Direction.FALL if change < 0 else Direction.RISE if change > 0 else Direction.LEVEL


@dataclass(frozen=True)
class HalfPrecision:
    """16-bit against fp32 training: the P-sized arrays against activations and the rest."""

    arrays_before: Figure
    arrays_after: Figure
    rest_before: Figure
    rest_after: Figure
    rest_change: Ratio  # signed
    rest_size: Ratio  # its size, unsigned: "26 %"
    rest_direction: Direction
    rest_halves: bool

    @property
    def rest_words(self) -> str:
        """'fall', 'rise' or 'stay level'."""
        return DIRECTION_WORDS[self.rest_direction]

    @property
    def rest_level(self) -> bool:
        return self.rest_direction == Direction.LEVEL


def half_precision(bf16: RowView | None, fp32: RowView | None) -> HalfPrecision | None:
    """What halves when weights and AdamW state go to 16 bits, and what the rest of the peak does."""
    if not bf16 or not fp32 or not bf16.net or not fp32.net or not bf16.components or not fp32.components:
        return None
    rest_before, rest_after = fp32.net.n_bytes - fixed_bytes(fp32), bf16.net.n_bytes - fixed_bytes(bf16)
    if rest_before <= 0:
        return None
    change = rest_after / rest_before - 1
    return HalfPrecision(arrays_before=figure(fixed_bytes(fp32)), arrays_after=figure(fixed_bytes(bf16)),
                         rest_before=figure(rest_before), rest_after=figure(rest_after), rest_change=signed(change),
                         rest_size=share(abs(change)),
                         rest_direction=_direction(change), rest_halves=change <= HALVES)


@dataclass(frozen=True)
class LogitsShare:
    """One fp32 copy of the logits (batch × length × vocabulary × 4 bytes) against the simulated activations."""

    vocabulary: str
    one_copy: Figure
    activations: Figure
    share: Ratio
    most: bool  # one copy is more than half of the activations


def logits_share(row: RowView | None, vocabulary: int) -> LogitsShare | None:
    """How much of a training row's simulated activations one copy of its logits is."""
    if row is None or not vocabulary or row.simulated_activations is None or row.simulated_activations.n_bytes <= 0:
        return None
    copy = row.tokens * vocabulary * 4
    value = copy / row.simulated_activations.n_bytes
    return LogitsShare(vocabulary=f"{vocabulary:,}", one_copy=figure(copy), activations=row.simulated_activations,
                       share=share(value), most=value > 0.5)


@dataclass(frozen=True)
class SameTokens:
    """Two rows with the same tokens per step, the longer sequence against the larger batch."""

    longer: RowView
    wider: RowView
    change: Ratio  # longer / wider − 1, signed
    within_spread: bool  # the two rows' repeat ranges overlap: no difference the repeats can tell apart
    longer_needs_more: bool

    @property
    def direction(self) -> str:
        """'more' or 'less': what the longer sequence needs."""
        return "more" if self.longer_needs_more else "less"


def same_tokens(longer: RowView | None, wider: RowView | None) -> SameTokens | None:
    """Whether the length or only the tokens count, judged against the repeats' spread."""
    if not longer or not wider or not longer.net or not wider.net or wider.net.n_bytes <= 0:
        return None
    low_l, high_l = longer.net_low or longer.net.n_bytes, longer.net_high or longer.net.n_bytes
    low_w, high_w = wider.net_low or wider.net.n_bytes, wider.net_high or wider.net.n_bytes
    change = longer.net.n_bytes / wider.net.n_bytes - 1
    return SameTokens(longer=longer, wider=wider, change=signed(change),
                      within_spread=low_l <= high_w and low_w <= high_l, longer_needs_more=change > 0)


@dataclass(frozen=True)
class LargeModel:
    """The worked example's model, simulated in 16-bit full training: its fixed arrays against the tensor peak."""

    model: str
    parameters: str
    shape: str  # "batch 1 × 512"
    fixed: Figure
    peak: Figure
    fixed_share: Ratio
    fixed_dominate: bool


def large_model(fit_table: FitTable | None) -> LargeModel | None:
    """Which share dominates full bf16 training of the example's model at its smallest simulated shape."""
    if fit_table is None:
        return None
    rows = [(s, parse_row(s.row)) for s in fit_table.example]
    full = [(s, row) for s, row in rows if row.mode == Mode.TRAIN and row.dtype == "bfloat16" and not row.lora_rank
            and not row.amp]
    if not full:
        return None
    line, row = min(full, key=lambda pair: pair[1].tokens_per_step)
    curve = next((c for c in fit_table.curves if c.model == line.model), None)
    if curve is None:
        return None
    fixed = fixed_costs(curve.parameters, curve.parameters, row.dtype, True).total
    value = fixed / line.tensor_peak_bytes
    return LargeModel(model=line.model, parameters=f"{curve.parameters:,}",
                      shape=f"batch {row.batch_size} × {row.seq_len:,}", fixed=Figure(fixed, format_gib(fixed)),
                      peak=Figure(line.tensor_peak_bytes, format_gib(line.tensor_peak_bytes)),
                      fixed_share=share(value), fixed_dominate=value >= 0.5)


@dataclass(frozen=True)
class GpuCarry:
    """What carries over from these CPU figures to a GPU, decided by the rows: the P-sized arrays always; the
    whole tensor peak only where CUDA's program (its attention kernel, its autocast lists) allocates what the
    CPU's does. The range is CUDA's tensor peak against the CPU's over the rows that have both."""

    rows: int
    low: Ratio  # signed: CUDA's tensor peak / the CPU's - 1, the lowest over the rows
    high: Ratio
    row_low: str  # the rows where each is found
    row_high: str

    @property
    def tolerance(self) -> str:
        """'1 %': within it, a CPU tensor peak is the GPU's too."""
        return share(CARRY_TOLERANCE).text

    @property
    def carries(self) -> bool:
        """Whether the tensor peaks carry over as they are: within 1 % on every row."""
        return abs(self.low.value) <= CARRY_TOLERANCE and abs(self.high.value) <= CARRY_TOLERANCE


CARRY_TOLERANCE = 0.01  # within it, a CPU tensor peak is the GPU's too


def gpu_carry(rows: tuple[RowView, ...]) -> GpuCarry | None:
    """CUDA's simulated tensor peak against the CPU's over the rows that have both; None without such rows."""
    found = [(row.simulated_gpu_tensor.n_bytes / row.tensor_peak.n_bytes - 1, row.id) for row in rows
             if row.simulated_gpu_tensor is not None and row.tensor_peak is not None and row.tensor_peak.n_bytes]
    if not found:
        return None
    (low, row_low), (high, row_high) = min(found), max(found)
    return GpuCarry(rows=len(found), low=signed(low), high=signed(high), row_low=row_low, row_high=row_high)
