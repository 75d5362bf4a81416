"""The allocator comparison: rows measured under more than one allocator, side by side, with the change of
each against glibc as a user's process gets it, and the step time with its spread over independent repeats.
Every sentence's direction and size comes from these figures."""

import statistics
from dataclasses import dataclass, replace

from generator.matrix import ALLOCATORS, DEFAULT_ALLOCATOR, TUNED_SETTINGS, TUNED_THRESHOLD_BYTES
from generator.store.records import RowResult
from generator.units import format_mib, mib_range, signed_percent


@dataclass(frozen=True)
class AllocatorCell:
    allocator: str
    net: str  # '5,883 MiB (5,880–5,890)'
    net_bytes: int
    change: str  # against glibc: '−12.0 %', '' for glibc itself
    change_value: float
    steps: str  # '14.2 s (13.9–15.0)': the two steps' time, median and range over the repeats
    steps_ratio: float  # against glibc's median; 1.0 for glibc


@dataclass(frozen=True)
class AllocatorRow:
    row: str  # the row under glibc: 'train-b8-s256'
    cells: tuple[AllocatorCell, ...]


@dataclass(frozen=True)
class AllocatorComparison:
    allocators: tuple[str, ...]
    rows: tuple[AllocatorRow, ...]
    tuned_sentence: str  # the tuned setting's effect on the largest compared row, in words; '' if not measured
    settings: str = " ".join(f"{key}={value}" for key, value in TUNED_SETTINGS.items())
    threshold_text: str = f"{TUNED_THRESHOLD_BYTES // 1024} KiB"


def _steps(result: RowResult) -> tuple[float, float, float]:
    times = [sum(r.step_seconds) for r in result.repeats if r.status == "ok" and r.step_seconds]
    return (statistics.median(times), min(times), max(times)) if times else (0.0, 0.0, 0.0)


def _cell(result: RowResult, reference: RowResult) -> AllocatorCell:
    summary = result.summary
    spread = (f" ({mib_range(summary.net_peak_min_bytes, summary.net_peak_max_bytes)})"
              if summary.net_peak_max_bytes > summary.net_peak_min_bytes else "")
    change = summary.net_peak_bytes / reference.summary.net_peak_bytes - 1
    median, low, high = _steps(result)
    base = _steps(reference)[0]
    return AllocatorCell(allocator=result.row.allocator, net=format_mib(summary.net_peak_bytes) + spread,
                         net_bytes=summary.net_peak_bytes,
                         change="" if result is reference else signed_percent(change), change_value=change,
                         steps=f"{median:.1f} s ({low:.1f}–{high:.1f})" if median else "–",
                         steps_ratio=median / base if base else 0.0)


def compare_allocators(results: list[RowResult]) -> AllocatorComparison | None:
    """Rows finished under glibc and the most other allocators (three or more where there are such); None where
    no row was measured under a second allocator."""
    finished = {r.row: r for r in results if r.finished}
    rows = []
    for row, reference in sorted(finished.items(), key=lambda item: (item[0].tokens_per_step, item[0].id)):
        if row.allocator != DEFAULT_ALLOCATOR:
            continue
        others = [finished[variant] for name in ALLOCATORS[1:]
                  if (variant := replace(row, allocator=name)) in finished]
        if others:
            rows.append(AllocatorRow(row.id, tuple(_cell(r, reference) for r in [reference, *others])))
    widest = max((len(row.cells) for row in rows), default=0)
    rows = [row for row in rows if len(row.cells) >= min(widest, 3)]  # the rows compared under most allocators,
    if not rows:  # measured in one run, so that their step times compare
        return None
    present = tuple(name for name in ALLOCATORS if any(c.allocator == name for r in rows for c in r.cells))
    return AllocatorComparison(allocators=present, rows=tuple(rows), tuned_sentence=_tuned_sentence(rows))


def _tuned_sentence(rows: list[AllocatorRow]) -> str:
    """'Setting glibc's two thresholds cut train-b8-s256's net peak by 12.0 % at 1.3× the step time.'"""
    tuned = [(row, cell) for row in rows for cell in row.cells if cell.allocator == "glibc-tuned"]
    if not tuned:
        return ""
    row, cell = max(tuned, key=lambda item: item[0].cells[0].net_bytes)  # the largest row compared
    verb = "cut" if cell.change_value < 0 else "raised"
    pace = (f"at {cell.steps_ratio:.1f}× the step time" if cell.steps_ratio else "(no step times recorded)")
    return (f"Setting glibc's two thresholds {verb} {row.row}'s net peak by "
            f"{signed_percent(abs(cell.change_value)).lstrip('+')} {pace}.")
