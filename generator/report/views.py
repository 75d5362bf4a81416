"""The article's rows as the page shows them: a measured row's figures, formatted, with its phases, its split into
P × bytes and the rest, and its prediction beside it. Frozen and typed; the templates place values only."""

import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from generator.budget import ProcessModel, fixed_costs, weight_bytes
from generator.coordinates import labels
from generator.matrix import DEFAULT_ALLOCATOR, Mode, RowSpec
from generator.store.records import RowResult, Summary
from generator.units import format_mib, mib_spread, signed_percent

PHASE_LABELS = {"load": "model built", "forward": "forward (step 1)", "backward": "backward (step 1)",
                "optimizer": "optimizer step 1", "decode": "decode (step 1)", "step2": "step 2"}
PHASE_ORDER = tuple(PHASE_LABELS)
MODE_LABELS: dict[str, str] = {Mode.INFERENCE: "inference", Mode.TRAIN: "training", Mode.GENERATE: "generation"}


def article_row(seq_len: int, mode: str = Mode.TRAIN, batch_size: int = 8, **coordinates: object) -> str:
    """The id of one of the article's rows: plain fp32 training at batch 8 of this length, unless told otherwise
    (``article_row(256, dtype="bfloat16")`` is ``train-b8-s256-bf16``). RowSpec spells it."""
    return RowSpec(mode, batch_size, seq_len, **coordinates).id  # type: ignore[arg-type]


class Part(StrEnum):
    """A slice of a row's peak, by name; PART_LABELS says it in the charts' words, in the charts' stacking order."""

    WEIGHTS = "weights"
    QUANTIZATION_CONSTANTS = "quantization_constants"
    GRADIENTS = "gradients"
    ADAMW_STATE = "adamw_state"
    ACTIVATIONS = "activations"
    KEPT = "kept"  # what the allocator kept beyond the simulated tensors
    REST = "rest"  # activations and the rest: the measured peak less P × bytes, where nothing was simulated


PART_LABELS = {Part.WEIGHTS: "weights", Part.QUANTIZATION_CONSTANTS: "quantization constants",
               Part.GRADIENTS: "gradients", Part.ADAMW_STATE: "AdamW state", Part.ACTIVATIONS: "activations",
               Part.KEPT: "kept by the allocator", Part.REST: "activations and the rest"}


@dataclass(frozen=True)
class Figure:
    """A byte count and how the page shows it."""

    n_bytes: int
    text: str


@dataclass(frozen=True)
class Ratio:
    """A dimensionless value and how the page shows it."""

    value: float
    text: str


@dataclass(frozen=True)
class Phase:
    """One phase's peak, net of the imports baseline."""

    name: str
    label: str
    net: Figure


@dataclass(frozen=True)
class Component:
    """One slice of a row's peak: weights, gradients, AdamW state, or activations and the rest."""

    name: Part
    n_bytes: int


@dataclass(frozen=True)
class RowView:
    """A measured row, as the table and charts show it."""

    id: str
    label: str
    mode: str
    batch_size: int
    seq_len: int
    tokens: int
    tokens_text: str
    dtype: str
    gradient_checkpointing: bool
    lora_rank: int
    memory_limit: str
    ok: bool
    status: str
    status_text: str  # a failed row's failure and its error's last line, byte counts read in MiB, for tables
    net: Figure | None
    peak: Figure | None
    times_weights: Ratio | None
    phases: tuple[Phase, ...]
    components: tuple[Component, ...]
    trainable_parameters: int
    cuda_reserved: Figure | None  # --device cuda: the caching allocator's peak reserve
    wall_seconds: float
    setup_seconds: float
    setup_share: Ratio | None
    spread: str = ""  # "6,480–6,600 MiB": the lowest and highest of the independent repeats
    repeats: int = 0
    repeats_note: str = ""
    tensor_peak: Figure | None = None  # simulated with fake tensors
    predicted: Figure | None = None  # the tensor peak plus the process overhead model
    prediction_error: Ratio | None = None  # (predicted − measured) / measured, signed
    overhead_share: Ratio | None = None  # (measured − tensor peak) / tensor peak: held beyond the tensors
    lora_targets: str = ""  # "q_proj, v_proj"
    allocator: str = DEFAULT_ALLOCATOR
    step_seconds: float = 0.0  # the median over repeats of the two steps' time
    time_text: str = ""  # '27.4 s (26.0–28.9)': the repeats' wall time, median and range
    net_low: int = 0  # the lowest and highest net peak of the independent repeats, in bytes
    net_high: int = 0
    simulated_activations: Figure | None = None  # the simulation's activations and temporaries at its peak
    amp: bool = False  # bf16 autocast over fp32 weights: another set-up than plain fp32 training
    pair: bool = False  # exactly two repeats finished: the figure is their midpoint, and both are shown
    detail: str = ""  # a failed row's error as recorded, word for word, for quoting
    detail_sizes: str = ""  # its byte counts read in MiB: '402,653,184 bytes is 384 MiB'
    simulated_reserve: Figure | None = None  # the simulation replayed through the CUDA caching allocator
    simulated_gpu_tensor: Figure | None = None  # the tensor peak of CUDA's program (its kernels and autocast)


def figure(n_bytes: int) -> Figure:
    """Bytes shown in MiB, the page's unit for measured figures."""
    return Figure(n_bytes, format_mib(n_bytes))


def ratio(value: float) -> Ratio:
    """'6.8×'."""
    return Ratio(value, f"{value:.1f}×")


def share(value: float) -> Ratio:
    """'26 %'."""
    return Ratio(value, f"{value * 100:.0f} %")


def signed(value: float) -> Ratio:
    """'+3.1 %' or '−2.0 %'."""
    return Ratio(value, signed_percent(value))


def row_label(row: RowSpec, lora_targets: str = "") -> str:
    """'training, batch 8 × 256, gradient checkpointing'; LoRA's targets as the row recorded them."""
    if row.mode == Mode.BASELINE:
        return "imports only (baseline)"
    head = f"{MODE_LABELS[row.mode]}, batch {row.batch_size} × {row.seq_len}"
    if row.new_tokens:
        head += f" prompt + {row.new_tokens} new tokens with the KV cache"
    return ", ".join([head, *labels(row, lora_targets)])  # each coordinate's phrase (generator/coordinates.py)


def components(result: RowResult, parameters: int) -> tuple[Component, ...]:
    """Split a row's net peak into what P × bytes predicts and the measured rest."""
    row, summary = result.row, result.summary
    costs = fixed_costs(parameters, result.model.trainable_parameters, row.dtype, row.mode == Mode.TRAIN)
    known = [(Part.WEIGHTS, costs.weights), (Part.GRADIENTS, costs.gradients), (Part.ADAMW_STATE, costs.adamw_state)]
    known = [(name, n_bytes) for name, n_bytes in known if n_bytes]
    rest = max(summary.net_peak_bytes - sum(n for _, n in known), 0)
    return tuple(Component(name, n_bytes) for name, n_bytes in [*known, (Part.REST, rest)])


def row_view(result: RowResult, parameters: int, process: ProcessModel | None = None) -> RowView:
    """One row, formatted."""
    row, summary = result.row, result.summary
    baseline = summary.baseline_bytes
    in_order = sorted(summary.phase_peak_bytes.items(),
                      key=lambda item: PHASE_ORDER.index(item[0]) if item[0] in PHASE_ORDER else len(PHASE_ORDER))
    phases = tuple(Phase(name, PHASE_LABELS.get(name, name), figure(max(peak - baseline, 0)))
                   for name, peak in in_order) if summary.ok else ()
    measured = summary.ok and row.mode != Mode.BASELINE
    failure = f"{summary.status.upper()} in {PHASE_LABELS.get(summary.phase, summary.phase or 'start-up')}"
    pair = sum(repeat.status == "ok" for repeat in result.repeats) == 2
    return RowView(
        id=row.id, label=row_label(row, summary.lora_targets), mode=row.mode, batch_size=row.batch_size,
        seq_len=row.seq_len,
        tokens=row.tokens_per_step, tokens_text=f"{row.tokens_per_step:,}", dtype=row.dtype,
        gradient_checkpointing=row.gradient_checkpointing, amp=row.amp,
        lora_rank=row.lora_rank,
        memory_limit=format_mib(row.memory_limit_bytes) if row.memory_limit_bytes else "",
        ok=summary.ok, status=summary.status,
        status_text="ok" if summary.ok else f"{failure}: {readable_detail(summary.detail)}" if summary.detail
        else failure,
        detail="" if summary.ok else summary.detail, detail_sizes="" if summary.ok else detail_sizes(summary.detail),
        net=figure(summary.net_peak_bytes) if summary.ok else None,
        peak=figure(summary.peak_rss_bytes) if summary.ok else None,
        times_weights=ratio(summary.net_peak_bytes / weight_bytes(parameters, "float32"))
        if measured and parameters else None,
        phases=phases,
        components=components(result, parameters) if measured else (),
        trainable_parameters=result.model.trainable_parameters,
        cuda_reserved=figure(summary.cuda_max_reserved_bytes) if summary.cuda_max_reserved_bytes else None,
        wall_seconds=summary.wall_seconds, setup_seconds=summary.setup_seconds,
        setup_share=share(summary.setup_share) if summary.ok and summary.setup_share is not None else None,
        spread=spread_text(summary, pair) if summary.ok and summary.net_peak_max_bytes > summary.net_peak_min_bytes
        else "", pair=pair,
        repeats=len(result.repeats), repeats_note=summary.repeats_note,
        lora_targets=", ".join(summary.lora_targets.split()),
        allocator=row.allocator, step_seconds=summary.steps_seconds, time_text=time_text(result),
        net_low=summary.net_peak_min_bytes if summary.ok else 0,
        net_high=summary.net_peak_max_bytes if summary.ok else 0,
        **prediction_fields(result, process),
    )


def spread_text(summary: Summary, pair: bool) -> str:
    """The repeats' lowest and highest net peak; with two repeats, both ('616 and 620 MiB'), since their median
    is only their midpoint."""
    low, high = summary.net_peak_min_bytes, summary.net_peak_max_bytes
    return f"{mib_spread(low, high, pair)} MiB"


def time_text(result: RowResult) -> str:
    """A row's wall time with its spread over independent repeats: one repeat's time is not a finding; two are
    shown both, their median being only their midpoint."""
    times = sorted(r.wall_seconds for r in result.repeats if r.status == "ok" and r.wall_seconds)
    if not times:
        return "–"
    median = statistics.median(times)
    if len(times) == 2:
        return f"{median:.1f} s ({times[0]:.1f} and {times[1]:.1f})"
    return f"{median:.1f} s" + (f" ({times[0]:.1f}–{times[-1]:.1f})" if len(times) > 1 else " (1 repeat)")


_BYTES_IN_TEXT = re.compile(r"\b(\d{7,}) bytes\b")


def readable_detail(detail: str) -> str:
    """An error's last line with its byte counts in MiB: 'allocate 384 MiB (402,653,184 bytes)'."""
    return _BYTES_IN_TEXT.sub(lambda m: f"{format_mib(int(m.group(1)))} ({int(m.group(1)):,} bytes)", detail)


def detail_sizes(detail: str) -> str:
    """The byte counts an error names, read in MiB: '402,653,184 bytes is 384 MiB'."""
    return "; ".join(f"{int(found):,} bytes is {format_mib(int(found))}" for found in _BYTES_IN_TEXT.findall(detail))


def prediction_fields(result: RowResult, process: ProcessModel | None) -> dict:
    """A row's prediction beside its measurement, where it has one."""
    prediction, summary = result.prediction, result.summary
    if prediction is None or not summary.ok or result.row.mode == Mode.BASELINE:
        return {}
    tensor = prediction.tensor_peak_bytes
    expected = process.expected(tensor) if process is not None else tensor
    measured = summary.net_peak_bytes
    return {"tensor_peak": figure(tensor), "predicted": figure(expected),
            "simulated_activations": figure(prediction.activations_bytes),
            "simulated_reserve": figure(prediction.cuda_reserved_bytes) if prediction.cuda_reserved_bytes else None,
            "simulated_gpu_tensor": figure(prediction.cuda_tensor_peak_bytes)
            if prediction.cuda_tensor_peak_bytes else None,
            "prediction_error": signed((expected - measured) / measured) if measured else None,
            "overhead_share": share((measured - tensor) / tensor) if tensor > 0 else None}


@dataclass(frozen=True)
class OverheadSummary:
    """What processes held beyond their tensors, across the rows with predictions."""

    rows: int
    low: Ratio
    high: Ratio
    median: Ratio
    largest_row: str  # the row with the largest share
    process_model: str  # the fitted model in words


def overhead_summary(views: Sequence[RowView], process: ProcessModel | None) -> OverheadSummary | None:
    """The spread of measured − tensor peak across the rows that carry a prediction."""
    shares = [(view.overhead_share.value, view.id) for view in views
              if view.overhead_share is not None and view.allocator == DEFAULT_ALLOCATOR]
    if not shares or process is None:
        return None
    values = sorted(value for value, _ in shares)
    return OverheadSummary(rows=len(shares), low=share(values[0]), high=share(values[-1]),
                           median=share(statistics.median(values)), largest_row=max(shares)[1],
                           process_model=process.describe())
