"""The page's context: one function turns an environment's rows into frozen, typed values.

Everything the page shows is computed here from the result files (figures, ratios, fits, verdicts) and
carried as text ready to place; the templates contain no arithmetic and no figures of their own."""

import os
import re
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from generator.budget import (
    ADAMW_STATES,
    BYTES_PER_WEIGHT,
    EXAMPLE_BYTES_PER_WEIGHT,
    EXAMPLE_CARD_BYTES,
    EXAMPLE_PARAMETERS,
    ProcessModel,
    fixed_costs,
    per_token_cost,
    weight_bytes,
)
from generator.fit_results import FitTable
from generator.matrix import RowSpec, parse_row
from generator.results import RowResult
from generator.units import MIB, format_gib, format_mib, mib_range, signed_percent

PHASE_LABELS = {"load": "model built", "forward": "forward (step 1)", "backward": "backward (step 1)",
                "optimizer": "optimizer step 1", "step2": "step 2"}
PHASE_ORDER = tuple(PHASE_LABELS)
MODE_LABELS = {"inference": "inference", "train": "training"}


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

    name: str
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
    status_text: str
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


@dataclass(frozen=True)
class Comparison:
    """Two rows side by side and what one is of the other."""

    subject: RowView
    reference: RowView
    ratio: Ratio  # subject / reference
    saving: Ratio  # 1 - subject / reference
    change: Ratio  # subject / reference - 1, signed: "−36 %" or "+2 %"


@dataclass(frozen=True)
class TokenFit:
    """Net peak against tokens per step, least squares over plain training rows."""

    per_token: Figure  # slope
    intercept: Figure
    r_squared: Ratio
    rows: tuple[str, ...]


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
    row: str
    shape: str  # "batch 8 × 2,048"
    need: Figure  # expected process peak, GiB
    fits: bool


@dataclass(frozen=True)
class OverheadSummary:
    """What processes held beyond their tensors, across the rows with predictions."""

    rows: int
    low: Ratio
    high: Ratio
    median: Ratio
    largest_row: str  # the row with the largest share
    process_model: str  # the fitted model in words


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


@dataclass(frozen=True)
class CappedRun:
    """A row run under a memory cap, set against the uncapped row's step peaks (whole-process RSS)."""

    row: RowView
    cap: str
    method: str
    step1_peak: Figure | None
    step2_peak: Figure | None
    peak_reached: Figure | None  # the capped process's peak before it failed (whole process)
    completed_step1: bool
    died_in: str
    row_cap_bytes: int = 0


@dataclass(frozen=True)
class Findings:
    """The bullets of the findings section; None where a row needed for one was not measured or failed."""

    train_vs_inference: Comparison | None
    train_vs_weights: Ratio | None
    floor_row: RowView | None
    floor_vs_weights: Ratio | None
    same_tokens: Comparison | None
    checkpointing: Comparison | None
    half_precision: Comparison | None
    lora: Comparison | None
    lora_trainable: str
    lora_share: str
    lora_targets: str  # "q_proj, v_proj", as the LoRA row recorded them
    fit: TokenFit | None


@dataclass(frozen=True)
class Verdict:
    """The budget rule this build measured, and which fix to try first for its batch-8 training row."""

    intercept: Figure  # the zero-token cost of full training (fit)
    per_token: Figure
    overhead: Ratio | None  # median process overhead over the tensor peak, where predictions exist
    row: RowView  # the row the shares are of
    fixed: Figure  # weights + gradients + AdamW state of that row
    fixed_share: Ratio
    activations_share: Ratio
    fixed_dominate: bool
    first: tuple[Comparison, ...]  # the fixes to try first, measured, best first
    then: tuple[Comparison, ...]


@dataclass(frozen=True)
class Noise:
    """Where the spread of independent repeats lives: library pages (RssFile) or heap and tensors (RssAnon),
    read at the end of each row's last phase."""

    rows: int
    widest_row: str
    widest_spread: Ratio  # (max − min) / median of the net peak, the widest row
    file_spread: Figure  # the largest max − min of RssFile across any row's repeats
    anon_spread: Figure  # likewise for RssAnon


def noise(results: Sequence[RowResult]) -> Noise | None:
    """The spreads of rows measured with two repeats or more, from every repeat kept in the files."""
    spreads, files, anons = [], [0], [0]
    for result in results:
        repeats = [r for r in result.repeats if r.status == "ok"]
        if len(repeats) < 2 or result.row.mode == "baseline" or result.row.memory_limit_bytes:
            continue
        nets = sorted(r.net_peak_bytes for r in repeats)
        if statistics.median(nets) <= 0:
            continue  # a damaged file: nothing to measure a spread against
        spreads.append(((nets[-1] - nets[0]) / statistics.median(nets), result.row.id))
        last = list(repeats[0].phase_peak_bytes)[-1:] if repeats[0].phase_peak_bytes else []
        for phase in last:
            file = [r.phase_rss_file_bytes.get(phase) for r in repeats]
            anon = [r.phase_rss_anon_bytes.get(phase) for r in repeats]
            if all(v is not None for v in file + anon):
                files.append(max(file) - min(file))  # type: ignore[type-var, operator]
                anons.append(max(anon) - min(anon))  # type: ignore[type-var, operator]
    if not spreads:
        return None
    widest = max(spreads)
    return Noise(rows=len(spreads), widest_row=widest[1], widest_spread=share(widest[0]),
                 file_spread=figure(max(files)), anon_spread=figure(max(anons)))


@dataclass(frozen=True)
class Headline:
    """Running against training at batch 8, as whole processes (what a limit applies to)."""

    inference: RowView
    training: RowView
    ratio: Ratio
    limit: Figure | None  # a cap measured to run the row's step 1 and kill its step 2


@dataclass(frozen=True)
class PageContext:
    """Everything the templates place."""

    title: str
    model_name: str
    model_source: str
    model_reference: str
    config_sha256: str
    parameters: int
    parameters_text: str
    environment: dict[str, str]
    environment_id: str
    measured_on: str
    built_on: str
    baseline: Figure | None
    rows: tuple[RowView, ...]
    failed_rows: tuple[RowView, ...]
    has_cuda: bool
    budget: Budget
    findings: Findings
    example: Example
    capped_runs: tuple[CappedRun, ...]
    peak_method: str
    setup_share_train_b8: Ratio | None
    versions_page: bool = False  # the site has a page comparing library versions
    fit_page: bool = False  # the site has the simulated fit page
    overhead: OverheadSummary | None = None
    has_predictions: bool = False
    headline: Headline | None = None
    verdict: Verdict | None = None
    noise: Noise | None = None


# ---------------------------------------------------------------- formatting


def figure(n_bytes: int) -> Figure:
    """Bytes shown in MiB, the page's unit for measured figures."""
    return Figure(n_bytes, format_mib(n_bytes))


def ratio(value: float) -> Ratio:
    """'6.8×'."""
    return Ratio(value, f"{value:.1f}×")


def share(value: float) -> Ratio:
    """'26 %'."""
    return Ratio(value, f"{value * 100:.0f} %")


def row_label(row: RowSpec, lora_targets: str = "") -> str:
    """'training, batch 8 × 256, gradient checkpointing'; LoRA's targets as the row recorded them."""
    if row.mode == "baseline":
        return "imports only (baseline)"
    parts = [f"{MODE_LABELS[row.mode]}, batch {row.batch_size} × {row.seq_len}"]
    if row.gradient_checkpointing:
        parts.append("gradient checkpointing")
    if row.dtype != "float32":
        parts.append(f"{row.dtype} weights and AdamW state")
    if row.lora_rank:
        parts.append(f"LoRA r={row.lora_rank}" + (f" on {', '.join(lora_targets.split())}" if lora_targets else ""))
    if row.memory_limit_bytes:
        parts.append(f"capped at {format_mib(row.memory_limit_bytes)}")
    return ", ".join(parts)


# ---------------------------------------------------------------- rows


def components(result: RowResult, parameters: int) -> tuple[Component, ...]:
    """Split a row's net peak into what P × bytes predicts and the measured rest."""
    row, summary = result.row, result.summary
    costs = fixed_costs(parameters, result.model.trainable_parameters, row.dtype, row.mode == "train")
    known = [("weights", costs.weights), ("gradients", costs.gradients), ("AdamW state", costs.adamw_state)]
    known = [(name, n_bytes) for name, n_bytes in known if n_bytes]
    rest = max(summary.net_peak_bytes - sum(n for _, n in known), 0)
    return tuple(Component(name, n_bytes) for name, n_bytes in [*known, ("activations and the rest", rest)])


def row_view(result: RowResult, parameters: int, process: ProcessModel | None = None) -> RowView:
    """One row, formatted."""
    row, summary = result.row, result.summary
    baseline = summary.baseline_bytes
    in_order = sorted(summary.phase_peak_bytes.items(),
                      key=lambda item: PHASE_ORDER.index(item[0]) if item[0] in PHASE_ORDER else len(PHASE_ORDER))
    phases = tuple(Phase(name, PHASE_LABELS.get(name, name), figure(max(peak - baseline, 0)))
                   for name, peak in in_order) if summary.ok else ()
    measured = summary.ok and row.mode != "baseline"
    failure = f"{summary.status.upper()} in {PHASE_LABELS.get(summary.phase, summary.phase or 'start-up')}"
    return RowView(
        id=row.id, label=row_label(row, summary.lora_targets), mode=row.mode, batch_size=row.batch_size,
        seq_len=row.seq_len,
        tokens=row.tokens_per_step, tokens_text=f"{row.tokens_per_step:,}", dtype=row.dtype,
        gradient_checkpointing=row.gradient_checkpointing,
        lora_rank=row.lora_rank,
        memory_limit=format_mib(row.memory_limit_bytes) if row.memory_limit_bytes else "",
        ok=summary.ok, status=summary.status,
        status_text="ok" if summary.ok else f"{failure}: {readable_detail(summary.detail)}" if summary.detail
        else failure,
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
        spread=(f"{mib_range(summary.net_peak_min_bytes, summary.net_peak_max_bytes)} MiB"
                if summary.ok and summary.net_peak_max_bytes > summary.net_peak_min_bytes else ""),
        repeats=len(result.repeats), repeats_note=summary.repeats_note,
        lora_targets=", ".join(summary.lora_targets.split()),
        **prediction_fields(result, process),
    )


_BYTES_IN_TEXT = re.compile(r"\b(\d{7,}) bytes\b")


def readable_detail(detail: str) -> str:
    """An error's last line with its byte counts in MiB: 'allocate 384 MiB (402,653,184 bytes)'."""
    return _BYTES_IN_TEXT.sub(lambda m: f"{format_mib(int(m.group(1)))} ({int(m.group(1)):,} bytes)", detail)


def signed(value: float) -> Ratio:
    """'+3.1 %' or '−2.0 %'."""
    return Ratio(value, signed_percent(value))


def prediction_fields(result: RowResult, process: ProcessModel | None) -> dict:
    """A row's prediction beside its measurement, where it has one."""
    prediction, summary = result.prediction, result.summary
    if prediction is None or not summary.ok or result.row.mode == "baseline":
        return {}
    tensor = prediction.tensor_peak_bytes
    expected = process.expected(tensor) if process is not None else tensor
    measured = summary.net_peak_bytes
    return {"tensor_peak": figure(tensor), "predicted": figure(expected),
            "prediction_error": signed((expected - measured) / measured) if measured else None,
            "overhead_share": share((measured - tensor) / tensor) if tensor > 0 else None}


# ---------------------------------------------------------------- findings


def compare(subject: RowView | None, reference: RowView | None) -> Comparison | None:
    """subject against reference, if both were measured."""
    if subject is None or reference is None or subject.net is None or reference.net is None:
        return None
    if not reference.net.n_bytes:
        return None
    value = subject.net.n_bytes / reference.net.n_bytes
    change = Ratio(value - 1, signed_percent(value - 1, 0))
    return Comparison(subject, reference, ratio(value), share(1 - value), change)


def token_fit(rows: Sequence[RowView], seq_len: int) -> TokenFit | None:
    """Least squares of net peak on tokens per step over plain fp32 training rows at one length."""
    plain = [r for r in rows if r.mode == "train" and r.net and r.dtype == "float32" and r.seq_len == seq_len
             and not r.gradient_checkpointing and not r.lora_rank and not r.memory_limit]
    if len({r.tokens for r in plain}) < 3 or len({r.net.n_bytes for r in plain if r.net}) < 2:
        return None  # a line needs three lengths, and a correlation needs the peaks to differ
    line = per_token_cost([r.tokens for r in plain], [r.net.n_bytes for r in plain if r.net])
    if line is None:
        return None
    return TokenFit(per_token=Figure(round(line.slope), f"{line.slope / MIB:.2f} MiB"),
                    intercept=figure(round(line.intercept)), r_squared=Ratio(line.r_squared, f"{line.r_squared:.3f}"),
                    rows=tuple(r.id for r in plain))


def findings(by_id: dict[str, RowView], parameters: int, lora_row: RowView | None, seq_len: int) -> Findings:
    """Every bullet of the findings section."""
    s = f"s{seq_len}"
    plain = by_id.get(f"train-b8-{s}")
    fp32_weights = weight_bytes(parameters, "float32")
    floor = by_id.get(f"train-b1-{s}")
    trainable = lora_row.trainable_parameters if lora_row else 0
    return Findings(
        train_vs_inference=compare(plain, by_id.get(f"infer-b8-{s}")),
        train_vs_weights=ratio(plain.net.n_bytes / fp32_weights) if plain and plain.net and fp32_weights else None,
        floor_row=floor if floor and floor.net else None,
        floor_vs_weights=ratio(floor.net.n_bytes / fp32_weights) if floor and floor.net and fp32_weights else None,
        same_tokens=compare(by_id.get(f"train-b4-s{seq_len * 2}"), plain),
        checkpointing=compare(by_id.get(f"train-b8-{s}-ckpt"), plain),
        half_precision=compare(by_id.get(f"train-b8-{s}-bf16"), plain),
        lora=compare(lora_row, plain),
        lora_trainable=f"{trainable:,}",
        lora_targets=lora_row.lora_targets if lora_row else "",
        lora_share=f"{trainable / parameters * 100:.2f} %" if parameters else "",
        fit=token_fit(list(by_id.values()), seq_len),
    )


def _phase(row: RowView | None, name: str) -> Figure | None:
    return next((phase.net for phase in row.phases if phase.name == name), None) if row else None


def row_label_of(row: RowView | None) -> str:
    """A row's label, or '' when it was not measured."""
    return row.label if row else ""


def _activations(row: RowView | None) -> Figure | None:
    rest = next((c.n_bytes for c in row.components if c.name == "activations and the rest"), None) if row else None
    return figure(rest) if rest is not None else None


def example(by_id: dict[str, RowView], fit: TokenFit | None, parameters: int, seq_len: int) -> Example:
    """The 7B-at-2-bytes scenario. Each multiplier is a token-independent cost of this build ÷ its weights."""
    weights = EXAMPLE_PARAMETERS * EXAMPLE_BYTES_PER_WEIGHT
    fp32_weights = weight_bytes(parameters, "float32")
    inference = _phase(by_id.get(f"infer-b8-s{seq_len}"), "load")
    lora_row = by_id.get(f"train-b8-s{seq_len}-lora8")
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
        multiplier = fixed_bytes / fp32_weights
        need = round(weights * multiplier)
        margin = abs(EXAMPLE_CARD_BYTES - need)
        lines.append(ExampleLine(task=task, measured_as=measured_as, multiplier=ratio(multiplier),
                                 need=Figure(need, format_gib(need)), fits=need <= EXAMPLE_CARD_BYTES,
                                 margin=Figure(margin, format_gib(margin))))
    return Example(parameters_text=f"{EXAMPLE_PARAMETERS / 1e9:g} billion",
                   bytes_per_weight=EXAMPLE_BYTES_PER_WEIGHT, weights=Figure(weights, format_gib(weights)),
                   card=Figure(EXAMPLE_CARD_BYTES, format_gib(EXAMPLE_CARD_BYTES, 0)), lines=tuple(lines),
                   activations_row=row_label_of(by_id.get(f"train-b8-s{seq_len}")),
                   activations_train=_activations(by_id.get(f"train-b8-s{seq_len}")),
                   activations_lora=_activations(lora_row))


def budget(parameters: int, measured_row: RowView | None) -> Budget:
    """P × bytes for fp32 full training with AdamW."""
    per_weight = BYTES_PER_WEIGHT["float32"]
    weights = parameters * per_weight
    total = weights * (2 + ADAMW_STATES)
    return Budget(bytes_per_weight=per_weight, adamw_states=ADAMW_STATES, weights=figure(weights),
                  gradients=figure(weights), adamw_state=figure(ADAMW_STATES * weights),
                  total=figure(total), total_times_weights=ratio(2 + ADAMW_STATES), measured_row=measured_row)


def capped_runs(results: Sequence[RowResult], views: dict[str, RowView]) -> tuple[CappedRun, ...]:
    """Capped rows next to the step peaks of the same row without a cap."""
    runs = []
    for result in results:
        row = result.row
        if not row.memory_limit_bytes:
            continue
        twin = next((r for r in results if r.row == row.with_limit(0) and r.summary.ok), None)
        step1, step2 = twin.summary.step_peaks() if twin else (0, 0)
        reached = result.summary.phase
        runs.append(CappedRun(
            row=views[row.id], cap=format_mib(row.memory_limit_bytes), row_cap_bytes=row.memory_limit_bytes,
            method=result.summary.memory_limit_method,
            step1_peak=figure(step1) if step1 else None, step2_peak=figure(step2) if step2 else None,
            peak_reached=figure(result.summary.peak_rss_bytes) if result.summary.peak_rss_bytes else None,
            completed_step1=result.summary.ok or (reached.startswith("step") and reached != "step1"),
            died_in=PHASE_LABELS.get(reached, reached) if not result.summary.ok else ""))
    return tuple(runs)


# ---------------------------------------------------------------- the page


def built_on(results: Sequence[RowResult]) -> str:
    """The build date: SOURCE_DATE_EPOCH if set, else the newest measurement, so rebuilding changes nothing."""
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        return datetime.fromtimestamp(int(epoch), UTC).date().isoformat()
    return max(result.measured_at for result in results)[:10]


def overhead_summary(views: Sequence[RowView], process: ProcessModel | None) -> OverheadSummary | None:
    """The spread of measured − tensor peak across the rows that carry a prediction."""
    shares = [(view.overhead_share.value, view.id) for view in views if view.overhead_share is not None]
    if not shares or process is None:
        return None
    values = sorted(value for value, _ in shares)
    return OverheadSummary(rows=len(shares), low=share(values[0]), high=share(values[-1]),
                           median=share(statistics.median(values)), largest_row=max(shares)[1],
                           process_model=process.describe())


def simulated_lines(fit_table: FitTable | None) -> tuple[SimulatedLine, ...]:
    """The worked example's config, simulated by `fit --record`, against the example's card."""
    if fit_table is None:
        return ()
    lines = []
    for item in fit_table.example:
        row = parse_row(item.row)
        lines.append(SimulatedLine(task=item.task, row=item.row,
                                   shape=f"batch {row.batch_size} × {row.seq_len:,}",
                                   need=Figure(item.peak_bytes, format_gib(item.peak_bytes)),
                                   fits=item.peak_bytes <= EXAMPLE_CARD_BYTES))
    return tuple(lines)


def headline(by_id: dict[str, RowView], seq_len: int, runs: Sequence[CappedRun]) -> Headline | None:
    """Process peaks of inference and training at batch 8, and the cap that separated them, if probed."""
    inference, training = by_id.get(f"infer-b8-s{seq_len}"), by_id.get(f"train-b8-s{seq_len}")
    if inference is None or training is None or inference.peak is None or training.peak is None:
        return None
    if inference.peak.n_bytes <= 0:
        return None  # a damaged file: no ratio to state
    died = next((run for run in runs if run.completed_step1 and not run.row.ok), None)
    limit = Figure(died.row_cap_bytes, died.cap) if died else None
    return Headline(inference=inference, training=training,
                    ratio=ratio(training.peak.n_bytes / inference.peak.n_bytes), limit=limit)


def verdict(found: Findings, by_id: dict[str, RowView], seq_len: int,
            overhead: OverheadSummary | None) -> Verdict | None:
    """Fixed costs against activations for plain batch-8 training, and the fixes that attack the larger."""
    row = by_id.get(f"train-b8-s{seq_len}")
    if row is None or row.net is None or found.fit is None or not row.components or row.net.n_bytes <= 0:
        return None
    fixed = sum(c.n_bytes for c in row.components if c.name != "activations and the rest")
    fixed_share = fixed / row.net.n_bytes
    for_fixed = [c for c in (found.lora, found.half_precision) if c is not None]
    for_activations = [c for c in (found.checkpointing,) if c is not None]
    first, then = (for_fixed, for_activations) if fixed_share >= 0.5 else (for_activations, for_fixed)
    return Verdict(intercept=found.fit.intercept, per_token=found.fit.per_token,
                   overhead=overhead.median if overhead else None, row=row, fixed=figure(fixed),
                   fixed_share=share(fixed_share), activations_share=share(1 - fixed_share),
                   fixed_dominate=fixed_share >= 0.5,
                   first=tuple(sorted(first, key=lambda c: c.ratio.value)),
                   then=tuple(sorted(then, key=lambda c: c.ratio.value)))


def build_context(results: Sequence[RowResult], process: ProcessModel | None = None,
                  fit_table: FitTable | None = None) -> PageContext:
    """Turn one environment's rows into the page's context."""
    ordered = sorted(results, key=lambda r: (r.row.mode != "baseline", r.row.memory_limit_bytes > 0,
                                             r.row.mode, r.row.tokens_per_step, r.row.id))
    modelled = [r for r in ordered if r.row.mode != "baseline" and r.model.parameters]
    first = modelled[0] if modelled else ordered[0]
    parameters = max((r.model.parameters - r.model.trainable_parameters if r.row.lora_rank
                      else r.model.parameters) for r in modelled) if modelled else 0
    views = {r.row.id: row_view(r, parameters, process) for r in ordered}
    uncapped = {row_id: view for row_id, view in views.items() if not view.memory_limit}
    seq_len = statistics.mode([r.row.seq_len for r in modelled]) if modelled else 0
    lora_row = next((v for v in uncapped.values() if v.lora_rank and v.ok), None)
    baseline = next((r for r in ordered if r.row.mode == "baseline" and r.summary.ok), None)
    environment = first.environment
    plain = uncapped.get(f"train-b8-s{seq_len}")
    page_findings = findings(uncapped, parameters, lora_row, seq_len)
    runs = capped_runs(ordered, views)
    overhead = overhead_summary(list(views.values()), process)
    return PageContext(
        title=f"It runs, so why won't it train? Peak memory of {first.model.name}",
        model_name=first.model.name,
        model_source=first.model.source,
        model_reference=first.model.reference,
        config_sha256=first.model.config_sha256,
        parameters=parameters,
        parameters_text=f"{parameters:,}",
        environment={"Python": environment.python, "torch": environment.torch,
                     "transformers": environment.transformers, "peft": environment.peft,
                     "device": environment.device,
                     "CPU": f"{environment.cpu} ({environment.cpu_count} cores; "
                            f"{environment.cpu_features or 'no flags read'})",
                     "memory": format_gib(environment.total_memory_bytes), "OS": environment.os},
        environment_id=environment.id,
        measured_on=max(r.measured_at for r in ordered)[:10],
        built_on=built_on(ordered),
        baseline=figure(baseline.summary.baseline_bytes) if baseline else None,
        rows=tuple(view for view in uncapped.values() if view.mode != "baseline"),
        failed_rows=tuple(view for view in views.values() if not view.ok and not view.memory_limit),
        has_cuda=any(view.cuda_reserved for view in views.values()),
        budget=budget(parameters, plain),
        findings=page_findings,
        example=replace(example(uncapped, page_findings.fit, parameters, seq_len),
                        simulated=simulated_lines(fit_table),
                        simulated_model=fit_table.example[0].model if fit_table and fit_table.example else ""),
        capped_runs=runs,
        peak_method=next((r.repeats[0].peak_method for r in ordered if r.repeats), ""),
        setup_share_train_b8=plain.setup_share if plain else None,
        overhead=overhead,
        has_predictions=any(view.predicted for view in views.values()),
        headline=headline(uncapped, seq_len, runs),
        noise=noise(ordered),
        verdict=verdict(page_findings, uncapped, seq_len, overhead),
    )
