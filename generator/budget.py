"""The budget model, shared by the page, `predict`, `fit` and `diff`: what a run costs before any token
(P × bytes for weights, gradients and AdamW state), what each token adds, and what a process holds beyond
its tensors (allocator and runtime overhead).

Pure arithmetic on integers and floats: no torch, no page formatting."""

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from generator.units import GIB

BYTES_PER_WEIGHT = {"float32": 4, "bfloat16": 2, "float16": 2}
ADAMW_STATES = 2  # exp_avg and exp_avg_sq, each the size of the trainable parameters, in their dtype

# The worked example's scenario (inputs, not results): a 7-billion-parameter model stored at 2 bytes per
# weight, on a card with 24 GiB of memory (sold as "24 GB").
EXAMPLE_PARAMETERS = 7_000_000_000
EXAMPLE_BYTES_PER_WEIGHT = 2
EXAMPLE_CARD_BYTES = 24 * GIB


def weight_bytes(parameters: int, dtype: str) -> int:
    """P × bytes per weight."""
    return parameters * BYTES_PER_WEIGHT[dtype]


# What a device holds beside the caching allocator's replayed segments, from documented figures until a GPU
# measures it (`memory-budget gpu`). The CUDA context with lazy module loading (the default in PyTorch since 1.13
# and in CUDA on Linux since 12.2): 287,047,680 bytes in the pull request that made it PyTorch's default (against
# 666,632,192 loading every kernel eagerly).
CUDA_CONTEXT_LAZY_BYTES = 287_047_680
CUDA_CONTEXT_SOURCE = "pytorch/pytorch#86509"
# cuBLAS's and cuBLASLt's workspaces, one each: 32 MiB on Hopper, the size cuBLAS's documentation recommends and
# PyTorch uses there since pytorch/pytorch#120925 (4 MiB on smaller cards, so this errs high there).
CUBLAS_WORKSPACE_BYTES = 32 * 2**20
CUBLAS_WORKSPACE_SOURCE = "pytorch/pytorch#120925"
CUDA_CONTEXT_BYTES = CUDA_CONTEXT_LAZY_BYTES + 2 * CUBLAS_WORKSPACE_BYTES
# The CUDA caching allocator's documented constants (generator/predict/cuda_allocator.py replays them).
CUDA_MIN_BLOCK = 512  # every request is rounded up to a multiple of this
CUDA_SMALL_SEGMENT = 2 * 2**20  # the small pool's segments (requests up to 1 MiB)
CUDA_LARGE_SEGMENT = 20 * 2**20  # the large pool's segment for requests under 10 MiB


def context_allowance_source() -> str:
    """Where the context allowance comes from, in words, with its parts."""
    return (f"the CUDA context with lazy module loading, {CUDA_CONTEXT_LAZY_BYTES:,} bytes as measured in "
            f"{CUDA_CONTEXT_SOURCE}, and cuBLAS's and cuBLASLt's workspaces, {CUBLAS_WORKSPACE_BYTES // 2**20} MiB "
            f"each on Hopper as in {CUBLAS_WORKSPACE_SOURCE}; documented figures, not measured here")


def cuda_rules() -> str:
    """The caching allocator's rules, in words, with their constants."""
    return (f"{CUDA_MIN_BLOCK}-byte rounding, small and large pools, {CUDA_SMALL_SEGMENT // 2**20} and "
            f"{CUDA_LARGE_SEGMENT // 2**20} MiB segments, no merging across segments")

@dataclass(frozen=True)
class FixedCosts:
    """What a row holds whatever its batch: weights, and for training the gradients and AdamW state of the
    trainable parameters (same dtype as the weights, as every row here trains)."""

    weights: int
    gradients: int
    adamw_state: int

    @property
    def total(self) -> int:
        """Their sum."""
        return self.weights + self.gradients + self.adamw_state


def fixed_costs(parameters: int, trainable: int, dtype: str, training: bool) -> FixedCosts:
    """P × bytes for the weights; trainable × bytes for gradients; 2 × trainable × bytes for AdamW."""
    per_weight = BYTES_PER_WEIGHT[dtype]
    trained = trainable if training else 0
    return FixedCosts(weights=parameters * per_weight, gradients=trained * per_weight,
                      adamw_state=ADAMW_STATES * trained * per_weight)


@dataclass(frozen=True)
class Line:
    """y = intercept + slope × x, fitted by least squares."""

    slope: float
    intercept: float
    r_squared: float
    points: int

    def at(self, x: float) -> float:
        """The line's value at x."""
        return self.intercept + self.slope * x


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> Line | None:
    """Least squares, or None where a line says nothing (fewer than two distinct x, or constant y)."""
    if len(set(xs)) < 2 or len(set(ys)) < 2:
        return None
    slope, intercept = statistics.linear_regression(xs, ys)
    return Line(slope=slope, intercept=intercept, r_squared=statistics.correlation(xs, ys) ** 2, points=len(xs))


def per_token_cost(tokens: Sequence[int], net_peaks: Sequence[int]) -> Line | None:
    """Net peak against tokens per step: the per-token cost (slope) and the zero-token cost (intercept).
    Three lengths at least, so that the line is tested by a point it was not drawn through."""
    return fit_line(tokens, net_peaks) if len(set(tokens)) >= 3 else None


@dataclass(frozen=True)
class ProcessModel:
    """Net peak (the process peak less its imports) = tensor peak × (1 + proportional) + fixed, fitted on measured rows.

    On Linux the gap is mostly glibc keeping freed activation memory, so it grows with the tensor peak; the
    fixed part is the runtime (kernels' workspaces, Python objects of the model)."""

    proportional: float
    fixed: float
    rows: int  # how many measured rows it was fitted on
    source: str  # where: the environment(s) and model(s)

    def expected(self, tensor_peak: int) -> int:
        """The net peak this machine is expected to show for a tensor peak."""
        return round(tensor_peak * (1 + self.proportional) + self.fixed)

    def describe(self) -> str:
        """The model in words."""
        if not self.rows or self.source.startswith("no overhead"):
            return "net peak = tensor peak: no measured rows with predictions to model the overhead on"
        return (f"net peak = tensor peak × {1 + self.proportional:.3f} {self.fixed / 2**20:+,.0f} MiB, "
                f"fitted on {self.source}")


def process_model(pairs: Sequence[tuple[int, int]], source: str) -> ProcessModel:
    """Fit the overhead on (tensor peak, measured net peak) pairs; with under three rows, no overhead."""
    line = fit_line([t for t, _ in pairs], [m for _, m in pairs]) if len(pairs) >= 3 else None
    if line is None:
        return ProcessModel(proportional=0.0, fixed=0.0, rows=len(pairs), source="no overhead modelled: "
                            "fewer than three measured rows with predictions")
    return ProcessModel(proportional=line.slope - 1, fixed=line.intercept, rows=len(pairs), source=source)


def largest_batch(peak: Callable[[int], int], usable: int, limit: int) -> int:
    """The largest batch b in 1..limit with peak(b) <= usable (0 when not even batch 1 fits), for a peak
    that grows with the batch: a binary search, so that peak(b) <= usable < peak(b + 1)."""
    if peak(1) > usable:
        return 0
    fits, too_big = 1, limit + 1
    while too_big - fits > 1:
        middle = (fits + too_big) // 2
        if peak(middle) <= usable:
            fits = middle
        else:
            too_big = middle
    return fits
