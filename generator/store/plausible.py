"""Plausibility checks on a loaded result: figures that no measurement could have produced are refused, naming
the file and the field, instead of being published as fact (a peak above the machine's memory, a process
smaller than its own net peak, a summary outside its repeats, a process peak out of all proportion to the
imports and the net peak it is made of)."""

from itertools import pairwise
from pathlib import Path

from generator.matrix import Mode
from generator.store.records import ResultsError, RowResult

# Where a file does not record the machine's memory: more than any machine has (1 PiB).
UNKNOWN_MACHINE_BYTES = 1024**5
# A process peak is its imports plus its net peak, repeat by repeat; the medians of those three figures agree to
# within the repeats' spread, so a process peak over twice the imports plus the largest net peak is damage.
PROCESS_RATIO = 2


def check(result: RowResult, path: Path) -> None:
    """Refuse a finished row whose figures contradict the machine, each other, or its repeats."""
    summary = result.summary
    if not summary.ok or result.row.mode == Mode.BASELINE:
        return
    _within_machine(result, path)
    if summary.peak_rss_bytes < summary.net_peak_bytes:
        raise ResultsError(f"{path}: [result] peak_rss_bytes = {summary.peak_rss_bytes} is below net_peak_bytes = "
                           f"{summary.net_peak_bytes}; a process cannot hold less than its own net peak")
    _within_repeats(result, path)
    parts = summary.baseline_bytes + max(summary.net_peak_bytes, summary.net_peak_max_bytes)
    if summary.peak_rss_bytes > PROCESS_RATIO * parts:
        raise ResultsError(f"{path}: [result] peak_rss_bytes = {summary.peak_rss_bytes} is over {PROCESS_RATIO}× "
                           f"the imports plus the net peak it is made of ({parts}); the file is damaged")


def _within_machine(result: RowResult, path: Path) -> None:
    total = result.environment.total_memory_bytes or UNKNOWN_MACHINE_BYTES
    basis = "the machine's recorded memory" if result.environment.total_memory_bytes else "any machine's memory"
    summary = result.summary
    figures = {"[result] peak_rss_bytes": summary.peak_rss_bytes, "[result] net_peak_bytes": summary.net_peak_bytes,
               "[result] net_peak_max_bytes": summary.net_peak_max_bytes,
               "[result] baseline_bytes": summary.baseline_bytes}
    figures |= {f"[result] phase_peak_bytes.{phase}": value for phase, value in summary.phase_peak_bytes.items()}
    figures |= {f"[repeats.{index}] peak_rss_bytes": repeat.peak_rss_bytes
                for index, repeat in enumerate(result.repeats)}
    for field, value in figures.items():
        if value > total:
            raise ResultsError(f"{path}: {field} = {value} is above {basis} ({total:,} bytes)")


def _within_repeats(result: RowResult, path: Path) -> None:
    summary = result.summary
    if summary.net_peak_max_bytes and not (
            summary.net_peak_min_bytes <= summary.net_peak_bytes <= summary.net_peak_max_bytes):
        raise ResultsError(f"{path}: [result] net_peak_bytes = {summary.net_peak_bytes} lies outside its own range "
                           f"({summary.net_peak_min_bytes}–{summary.net_peak_max_bytes})")
    nets = [repeat.net_peak_bytes for repeat in result.repeats if repeat.status == "ok"]
    if nets and not min(nets) <= summary.net_peak_bytes <= max(nets):
        raise ResultsError(f"{path}: [result] net_peak_bytes = {summary.net_peak_bytes} lies outside its repeats "
                           f"({min(nets)}–{max(nets)})")


# ---------------------------------------------------------------- simulated figures: predictions, curves, history

LIMIT_BYTES = 2**60  # 1 EiB: more than any machine or card holds; a simulated figure at or above it is damage
SPLIT = ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes")  # a tensor peak's parts


def check_simulated(figures: object, path: Path, table: str) -> None:
    """Refuse a simulated row's figures (a result file's [prediction], a kept simulation's [part], a history
    row) that no simulation makes: a byte count at or above 1 EiB, a tensor peak smaller than its split's sum or
    than a phase's peak (a simulation's split is the peak, and its largest phase sets it), a GPU reserve below the
    tensors it holds, more trainable parameters than there are. ``table`` names where the figures sit."""
    values = vars(figures)
    for name, value in values.items():
        if name.endswith("_bytes") and isinstance(value, int) and not 0 <= value < LIMIT_BYTES:
            raise ResultsError(f"{path}: [{table}] {name} = {value} is not a byte count from 0 to 1 EiB")
    peak = values.get("tensor_peak_bytes")
    if isinstance(peak, int) and all(isinstance(values.get(name), int) for name in SPLIT):
        split = sum(values[name] for name in SPLIT)
        if split > peak:
            raise ResultsError(f"{path}: [{table}] tensor_peak_bytes = {peak} is below the sum of its split "
                               f"(weights, gradients, AdamW state, activations: {split})")
        phases = values.get("phase_peak_bytes") or {}
        if phases and max(phases.values()) > peak:
            raise ResultsError(f"{path}: [{table}] tensor_peak_bytes = {peak} is below a phase's peak "
                               f"({max(phases.values())})")
    _reserves_hold_tensors(values, path, table)
    if values.get("trainable_parameters", 0) > values.get("parameters", 0):
        raise ResultsError(f"{path}: [{table}] trainable_parameters = {values['trainable_parameters']} is more "
                           f"than parameters = {values['parameters']}")


def _reserves_hold_tensors(values: dict, path: Path, table: str) -> None:
    tensors = values.get("cuda_tensor_peak_bytes")
    for name in ("cuda_reserved_bytes", "cuda_expandable_bytes"):
        reserve = values.get(name)
        if isinstance(tensors, int) and isinstance(reserve, int) and reserve < tensors:
            raise ResultsError(f"{path}: [{table}] {name} = {reserve} is below cuda_tensor_peak_bytes = {tensors}; "
                               "the caching allocator reserves at least the tensors it holds")


def check_curve_figures(model: str, kind: str, tensor: tuple[int, ...], reserves: tuple[int, ...],
                        path: Path) -> None:
    """Refuse a curve whose figures no simulation makes: a byte count out of 0 to 1 EiB, or a tensor peak that
    falls as the batch grows (every set-up's live bytes grow with the batch)."""
    for value in (*tensor, *reserves):
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < LIMIT_BYTES:
            raise ResultsError(f"{path}: {model}'s {kind!r} curve holds {value!r}, not a byte count from 0 to 1 EiB")
    if any(later < earlier for earlier, later in pairwise(tensor)):
        raise ResultsError(f"{path}: {model}'s {kind!r} curve has a tensor peak that falls as the batch grows")
