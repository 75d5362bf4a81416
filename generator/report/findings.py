"""What the article concludes from its rows, each computed from them: the comparisons of the findings section,
the per-token fit, the verdict on which fix to try first, where the noise lives, the headline, and the capped
runs. None where a row a conclusion needs was not measured or failed."""

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from generator.budget import (
    per_token_cost,
    weight_bytes,
)
from generator.matrix import DEFAULT_ALLOCATOR, Mode
from generator.report.claims import (
    HalfPrecision,
    LogitsShare,
    SameTokens,
    fixed_bytes,
    half_precision,
    logits_share,
    same_tokens,
)
from generator.report.views import (
    PHASE_LABELS,
    Figure,
    OverheadSummary,
    Ratio,
    RowView,
    article_row,
    figure,
    ratio,
    share,
)
from generator.store.records import RowResult
from generator.units import MIB, format_mib, signed_percent


@dataclass(frozen=True)
class Comparison:
    """Two rows side by side and what one is of the other."""

    subject: RowView
    reference: RowView
    ratio: Ratio  # subject / reference
    saving: Ratio  # 1 - subject / reference
    change: Ratio  # subject / reference - 1, signed: "−36 %" or "+2 %"
    gpu_change: Ratio | None = None  # the same for their simulated GPU reserves, where both were simulated


@dataclass(frozen=True)
class TokenFit:
    """Net peak against tokens per step, least squares over plain training rows."""

    per_token: Figure  # slope
    intercept: Figure
    r_squared: Ratio
    rows: tuple[str, ...]


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
    lora: Comparison | None  # LoRA on the fp32 base against full fp32 training: each fix against its own baseline
    allocator: Comparison | None  # glibc with fixed mmap and trim thresholds against the default, batch-8 training
    lora_trainable: str
    lora_share: str
    lora_targets: str  # "q_proj, v_proj", as the LoRA row recorded them
    fit: TokenFit | None
    sixteen_bit: HalfPrecision | None = None  # what halves in 16-bit, and what the rest does
    logits: LogitsShare | None = None  # one copy of the logits against the simulated activations
    tokens: SameTokens | None = None  # the longer sequence against the larger batch, at the same tokens
    bf16_lora: Comparison | None = None  # LoRA on a bf16 base against full bf16 training


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
    first: tuple[Comparison, ...]  # the fixes to try first, measured, best first, each against its baseline
    then: tuple[Comparison, ...]
    cpu_only: Comparison | None = None  # the tuned allocator: a CPU process's setting, never a GPU's first fix
    gpu_order: tuple[Comparison, ...] = ()  # the fixes by simulated GPU reserve, where that order differs


@dataclass(frozen=True)
class Noise:
    """Where the spread of independent repeats lives: library pages (RssFile) or heap and tensors (RssAnon),
    read at the end of each row's last phase."""

    rows: int
    widest_row: str
    widest_spread: Ratio  # (max − min) / median of the net peak, the widest row
    file_spread: Figure  # the largest max − min of RssFile across any row's repeats
    anon_spread: Figure  # likewise for RssAnon


@dataclass(frozen=True)
class Headline:
    """Running against training at batch 8: the ratio of net peaks, and whole processes for what a limit sees."""

    inference: RowView
    training: RowView
    ratio: Ratio
    limit: Figure | None  # a cap measured to run the row's step 1 and kill its step 2
    inference_under_limit: bool = False  # inference's whole process peaked below that cap (not run under it)


def compare(subject: RowView | None, reference: RowView | None) -> Comparison | None:
    """subject against reference, if both were measured."""
    if subject is None or reference is None or subject.net is None or reference.net is None:
        return None
    if not reference.net.n_bytes:
        return None
    value = subject.net.n_bytes / reference.net.n_bytes
    change = Ratio(value - 1, signed_percent(value - 1, 0))
    gpu = None
    if subject.simulated_reserve is not None and reference.simulated_reserve is not None:
        on_gpu = subject.simulated_reserve.n_bytes / reference.simulated_reserve.n_bytes - 1
        gpu = Ratio(on_gpu, signed_percent(on_gpu, 0))
    return Comparison(subject, reference, ratio(value), share(1 - value), change, gpu)


def token_fit(rows: Sequence[RowView], seq_len: int) -> TokenFit | None:
    """Least squares of net peak on tokens per step over plain fp32 training rows at one length."""
    plain = [r for r in rows if r.mode == Mode.TRAIN and r.net and r.dtype == "float32" and r.seq_len == seq_len
             and not r.gradient_checkpointing and not r.lora_rank and not r.amp and not r.memory_limit
             and r.allocator == DEFAULT_ALLOCATOR]
    if len({r.tokens for r in plain}) < 3 or len({r.net.n_bytes for r in plain if r.net}) < 2:
        return None  # a line needs three lengths, and a correlation needs the peaks to differ
    line = per_token_cost([r.tokens for r in plain], [r.net.n_bytes for r in plain if r.net])
    if line is None:
        return None
    return TokenFit(per_token=Figure(round(line.slope), f"{line.slope / MIB:.2f} MiB"),
                    intercept=figure(round(line.intercept)), r_squared=Ratio(line.r_squared, f"{line.r_squared:.4f}"),
                    rows=tuple(r.id for r in plain))


def findings(by_id: dict[str, RowView], parameters: int, lora_row: RowView | None, seq_len: int,
             vocabulary: int = 0) -> Findings:
    """Every bullet of the findings section; vocabulary sizes the logits (0: not known, no sentence)."""
    plain, bf16 = by_id.get(article_row(seq_len)), by_id.get(article_row(seq_len, dtype="bfloat16"))
    fp32_weights = weight_bytes(parameters, "float32")
    floor = by_id.get(article_row(seq_len, batch_size=1))
    trainable = lora_row.trainable_parameters if lora_row else 0
    return Findings(
        train_vs_inference=compare(plain, by_id.get(article_row(seq_len, Mode.INFERENCE))),
        train_vs_weights=ratio(plain.net.n_bytes / fp32_weights) if plain and plain.net and fp32_weights else None,
        floor_row=floor if floor and floor.net else None,
        floor_vs_weights=ratio(floor.net.n_bytes / fp32_weights) if floor and floor.net and fp32_weights else None,
        same_tokens=compare(by_id.get(article_row(seq_len * 2, batch_size=4)), plain),
        checkpointing=compare(by_id.get(article_row(seq_len, gradient_checkpointing=True)), plain),
        half_precision=compare(bf16, plain),
        lora=compare(by_id.get(article_row(seq_len, lora_rank=8)), plain),
        bf16_lora=compare(by_id.get(article_row(seq_len, dtype="bfloat16", lora_rank=8)), bf16),
        allocator=compare(by_id.get(article_row(seq_len, allocator="glibc-tuned")), plain),
        lora_trainable=f"{trainable:,}",
        lora_targets=lora_row.lora_targets if lora_row else "",
        lora_share=f"{trainable / parameters * 100:.2f} %" if parameters else "",
        fit=token_fit(list(by_id.values()), seq_len),
        sixteen_bit=half_precision(bf16, plain),
        logits=logits_share(plain, vocabulary),
        tokens=same_tokens(by_id.get(article_row(seq_len * 2, batch_size=4)), plain),
    )


def small_figure(n_bytes: int) -> Figure:
    """A spread in MiB with one decimal under 10 MiB: 0.4 MiB is not '0 MiB'."""
    return Figure(n_bytes, f"{n_bytes / MIB:,.1f} MiB") if n_bytes < 10 * MIB else figure(n_bytes)


def noise(results: Sequence[RowResult]) -> Noise | None:
    """The spreads of rows measured with two repeats or more, from every repeat kept in the files."""
    spreads, files, anons = [], [0], [0]
    for result in results:
        repeats = [r for r in result.repeats if r.status == "ok"]
        if len(repeats) < 2 or result.row.mode == Mode.BASELINE or result.row.memory_limit_bytes:
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
                 file_spread=small_figure(max(files)), anon_spread=small_figure(max(anons)))


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


def headline(by_id: dict[str, RowView], seq_len: int, runs: Sequence[CappedRun]) -> Headline | None:
    """Net peaks of inference and training at batch 8 (the page's one basis), their whole processes for a limit,
    and the cap that separated them, if probed."""
    inference, training = by_id.get(article_row(seq_len, Mode.INFERENCE)), by_id.get(article_row(seq_len))
    if inference is None or training is None or inference.net is None or training.net is None:
        return None
    if inference.net.n_bytes <= 0 or inference.peak is None or training.peak is None:
        return None  # a damaged file: no ratio to state
    died = next((run for run in runs if run.completed_step1 and not run.row.ok), None)
    limit = Figure(died.row_cap_bytes, died.cap) if died else None
    return Headline(inference=inference, training=training,
                    ratio=ratio(training.net.n_bytes / inference.net.n_bytes), limit=limit,
                    inference_under_limit=limit is not None and inference.peak.n_bytes < limit.n_bytes)


def gpu_order(ordered: Sequence[Comparison]) -> tuple[Comparison, ...]:
    """The fixes as a GPU reader would rank them, by the change of the simulated GPU reserve, best first; empty
    where a fix lacks a simulation, or where that order is the page's own (`ordered`)."""
    if not ordered or any(c.gpu_change is None for c in ordered):
        return ()
    by_gpu = tuple(sorted(ordered, key=lambda c: c.gpu_change.value))  # type: ignore[union-attr]
    return () if [c.subject.id for c in by_gpu] == [c.subject.id for c in ordered] else by_gpu


def verdict(found: Findings, by_id: dict[str, RowView], seq_len: int,
            overhead: OverheadSummary | None) -> Verdict | None:
    """Fixed costs against activations for plain batch-8 training, and the fixes that attack the larger."""
    row = by_id.get(article_row(seq_len))
    if row is None or row.net is None or found.fit is None or not row.components or row.net.n_bytes <= 0:
        return None
    fixed = fixed_bytes(row)
    fixed_share = fixed / row.net.n_bytes
    for_fixed = [c for c in (found.lora, found.half_precision) if c is not None]
    for_activations = [c for c in (found.checkpointing,) if c is not None]
    first, then = (for_fixed, for_activations) if fixed_share >= 0.5 else (for_activations, for_fixed)
    first_sorted, then_sorted = (tuple(sorted(group, key=lambda c: c.ratio.value)) for group in (first, then))
    return Verdict(intercept=found.fit.intercept, per_token=found.fit.per_token,
                   overhead=overhead.median if overhead else None, row=row, fixed=figure(fixed),
                   fixed_share=share(fixed_share), activations_share=share(1 - fixed_share),
                   fixed_dominate=fixed_share >= 0.5,
                   first=first_sorted, then=then_sorted, cpu_only=found.allocator,
                   gpu_order=gpu_order((*first_sorted, *then_sorted)))
