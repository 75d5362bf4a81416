"""Plausibility checks on a loaded result: figures that no measurement could have produced are refused, naming
the file and the field, instead of being published as fact (a peak above the machine's memory, a process
smaller than its own net peak, a summary outside its repeats, a process peak out of all proportion to the
imports and the net peak it is made of)."""

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
