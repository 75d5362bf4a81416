"""The article's worked numbers: the P × bytes budget, the 7-billion-parameter example scaled from this build's
fixed costs (with its simulated rows from `fit --record`), and what processes held beyond their tensors."""

from dataclasses import dataclass

from generator.answers.fit import STATED_MARGIN, card_needs, usable_bytes
from generator.budget import (
    ADAMW_STATES,
    BYTES_PER_WEIGHT,
    EXAMPLE_BYTES_PER_WEIGHT,
    EXAMPLE_CARD_BYTES,
    EXAMPLE_PARAMETERS,
    weight_bytes,
)
from generator.matrix import Mode, parse_row
from generator.report.findings import TokenFit
from generator.report.views import Figure, Part, Ratio, RowView, article_row, figure, ratio
from generator.store.fit_table import FitTable
from generator.units import format_gib


@dataclass(frozen=True)
class ExampleLine:
    """One scenario of the worked example: a measured multiplier of the weights, scaled to the example."""

    task: str
    measured_as: str  # where the multiplier comes from, in words
    multiplier: Ratio
    need: Figure
    fits: bool
    margin: Figure  # headroom when it fits, shortfall when it does not


@dataclass(frozen=True)
class Example:
    """The P × bytes-per-weight worked example. Multipliers are the token-independent costs measured in
    this build, so they carry over to a larger model; activations are reported separately."""

    parameters_text: str
    bytes_per_weight: int
    weights: Figure
    card: Figure
    lines: tuple[ExampleLine, ...]
    activations_row: str  # the label of the row whose activations are quoted for scale
    activations_train: Figure | None  # this model's activations and the rest at batch 8, full training
    activations_lora: Figure | None
    simulated: tuple["SimulatedLine", ...] = ()  # the example's own config, simulated (fit --record)
    simulated_model: str = ""


@dataclass(frozen=True)
class SimulatedLine:
    """A simulated row of the worked example's config, against the card."""

    task: str
    shape: str  # "batch 8 × 2,048"
    need: Figure  # the simulated CUDA reserve plus the context allowance, GiB
    fits: bool  # within the card less the site's margin, as every GPU answer is judged
    precision: str = ""  # 'bf16', 'fp32 with bf16 autocast' or 'fp32': what the row stores its arrays in


@dataclass(frozen=True)
class Budget:
    """What P parameters cost before any activation: weights, gradients and AdamW state, in fp32."""

    bytes_per_weight: int
    adamw_states: int
    weights: Figure
    gradients: Figure
    adamw_state: Figure
    total: Figure
    total_times_weights: Ratio
    measured_row: RowView | None


def _phase(row: RowView | None, name: str) -> Figure | None:
    return next((phase.net for phase in row.phases if phase.name == name), None) if row else None


def row_label_of(row: RowView | None) -> str:
    """A row's label, or '' when it was not measured."""
    return row.label if row else ""


def _activations(row: RowView | None) -> Figure | None:
    rest = next((c.n_bytes for c in row.components if c.name == Part.REST), None) if row else None
    return figure(rest) if rest is not None else None


def example(by_id: dict[str, RowView], fit: TokenFit | None, parameters: int, seq_len: int,
            example_model: tuple[str, int] = ("", EXAMPLE_PARAMETERS)) -> Example:
    """The 7B-at-2-bytes scenario: the simulated example model's own parameter count where the fit table has it,
    else 7 billion. Each multiplier is a token-independent cost of this build ÷ its weights, shown to the two
    decimals the need is computed with, so the table's arithmetic can be redone by hand."""
    name, example_parameters = example_model
    weights = example_parameters * EXAMPLE_BYTES_PER_WEIGHT
    fp32_weights = weight_bytes(parameters, "float32")
    inference = _phase(by_id.get(article_row(seq_len, Mode.INFERENCE)), "load")
    lora_row = by_id.get(article_row(seq_len, lora_rank=8))
    adapter = _phase(lora_row, "load")
    scenarios = [
        ("run it", "inference row, model built, before any token", inference.n_bytes if inference else 0),
        ("train all of it", "training's peak at zero tokens: the intercept of the fit above",
         fit.intercept.n_bytes if fit else 0),
        ("train a LoRA adapter", "LoRA row, model and adapter built, before any token",
         adapter.n_bytes if adapter else 0),
    ]
    lines = []
    for task, measured_as, fixed_bytes in scenarios:
        if fixed_bytes <= 0 or not fp32_weights:
            continue  # not measured, or a fit too poor to extrapolate from
        multiplier = round(fixed_bytes / fp32_weights, 2)
        need = round(weights * multiplier)
        margin = abs(EXAMPLE_CARD_BYTES - need)
        lines.append(ExampleLine(task=task, measured_as=measured_as, multiplier=Ratio(multiplier, f"{multiplier:.2f}×"),
                                 need=Figure(need, format_gib(need)), fits=need <= EXAMPLE_CARD_BYTES,
                                 margin=Figure(margin, format_gib(margin))))
    text = f"{name}'s {example_parameters:,}" if name else f"a model of {example_parameters / 1e9:g} billion"
    return Example(parameters_text=text,
                   bytes_per_weight=EXAMPLE_BYTES_PER_WEIGHT, weights=Figure(weights, format_gib(weights)),
                   card=Figure(EXAMPLE_CARD_BYTES, format_gib(EXAMPLE_CARD_BYTES, 0)), lines=tuple(lines),
                   activations_row=row_label_of(by_id.get(article_row(seq_len))),
                   activations_train=_activations(by_id.get(article_row(seq_len))),
                   activations_lora=_activations(lora_row))


def budget(parameters: int, measured_row: RowView | None) -> Budget:
    """P × bytes for fp32 full training with AdamW."""
    per_weight = BYTES_PER_WEIGHT["float32"]
    weights = parameters * per_weight
    total = weights * (2 + ADAMW_STATES)
    return Budget(bytes_per_weight=per_weight, adamw_states=ADAMW_STATES, weights=figure(weights),
                  gradients=figure(weights), adamw_state=figure(ADAMW_STATES * weights),
                  total=figure(total), total_times_weights=ratio(2 + ADAMW_STATES), measured_row=measured_row)


def example_usable_bytes() -> int:
    """The example's card less the site's margin: what a simulated line is judged against."""
    return usable_bytes(EXAMPLE_CARD_BYTES, STATED_MARGIN)


def simulated_lines(fit_table: FitTable | None) -> tuple[SimulatedLine, ...]:
    """The worked example's config, simulated (its tensor peaks recorded with the curves), replayed through the
    CUDA caching allocator, with the context allowance, against the example's card: what the fit page's GPU
    columns use too."""
    if fit_table is None:
        return ()
    usable = example_usable_bytes()
    lines = []
    for item in fit_table.example:
        row = parse_row(item.row)
        need = card_needs(item.cuda_reserved_bytes)  # the card's allocator, simulated, and its context
        shape = f"batch {row.batch_size} × {row.seq_len:,}" + (
            f" + {row.new_tokens} new tokens (KV cache)" if row.new_tokens else "")
        precision = "bf16" if row.dtype == "bfloat16" else "fp32 with bf16 autocast" if row.amp else "fp32"
        lines.append(SimulatedLine(task=item.task, shape=shape, precision=precision,
                                   need=Figure(need, format_gib(need)), fits=need <= usable))
    return tuple(lines)
