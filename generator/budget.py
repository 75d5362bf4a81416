"""The budget model, shared by the page, `predict`, `fit` and `diff`: what a run costs before any token
(P × bytes for weights, gradients and AdamW state), what each token adds, and what a process holds beyond
its tensors (allocator and runtime overhead).

Pure arithmetic on integers and floats: no torch, no page formatting."""

import statistics
from collections.abc import Sequence
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

