"""The versions page's history: each default row's simulated tensor peak under every recorded transformers
release, oldest first, and the steps between consecutive releases larger than STEP_SHARE, each named by the
release where it happened and the category (weights, gradients, AdamW state, activations) that moved most."""

from dataclasses import dataclass, field
from itertools import pairwise

from generator.store.history import CATEGORY_FIELDS, ReleaseEntry, RowPeak
from generator.units import signed_mib, signed_percent

STEP_SHARE = 0.01  # a step of 1 % or more is named; tensor peaks are exact, so smaller ones are real too


@dataclass(frozen=True)
class Step:
    row: str
    before: str  # the releases either side
    after: str
    change: str  # '+3.2 % (+12 MiB)'
    change_value: float
    category: str  # 'activations (+12 MiB)'


@dataclass(frozen=True)
class HistoryContext:
    model: str
    releases: tuple[str, ...]  # the releases that ran, oldest first
    failed: tuple[tuple[str, str], ...]  # (release, why) for those that could not run
    points: tuple[tuple[str, str, float], ...]  # (row, release, MiB) for the chart
    steps: tuple[Step, ...]
    seconds: str  # the simulations' time, summed over releases
    first: str
    last: str
    step_text: str = ""  # '1 %': the smallest step named
    peaks: dict[tuple[str, str], int] = field(default_factory=dict)  # (row, release) -> tensor peak bytes


def _category(old: RowPeak, new: RowPeak) -> str:
    moves = {name: getattr(new, key) - getattr(old, key) for name, key in CATEGORY_FIELDS.items()}
    name = max(moves, key=lambda category: abs(moves[category]))
    return f"{name} ({signed_mib(moves[name])})"


def steps(entries: tuple[ReleaseEntry, ...]) -> tuple[Step, ...]:
    """Every change of STEP_SHARE or more between one release that ran a row and the next that did."""
    found = []
    rows = dict.fromkeys(peak.row for entry in entries for peak in entry.rows)
    for row in rows:
        series = [(entry.transformers, peak) for entry in entries for peak in entry.rows
                  if peak.row == row and not peak.error and peak.tensor_peak_bytes]
        for (before, old), (after, new) in pairwise(series):
            change = new.tensor_peak_bytes / old.tensor_peak_bytes - 1
            if abs(change) >= STEP_SHARE:
                delta = new.tensor_peak_bytes - old.tensor_peak_bytes
                found.append(Step(row=row, before=before, after=after, change_value=change,
                                  change=f"{signed_percent(change)} ({signed_mib(delta)})",
                                  category=_category(old, new)))
    return tuple(found)


def history_context(model: str, entries: tuple[ReleaseEntry, ...]) -> HistoryContext | None:
    """The page's history section; None where no release was recorded."""
    ran = tuple(entry for entry in entries if not entry.error and any(not p.error for p in entry.rows))
    if not ran:
        return None
    failed = tuple((entry.transformers, entry.error or "; ".join(f"{p.row}: {p.error}" for p in entry.rows))
                   for entry in entries if entry not in ran)
    points = tuple((peak.row, entry.transformers, peak.tensor_peak_bytes / 2**20) for entry in ran
                   for peak in entry.rows if not peak.error)
    return HistoryContext(model=model, releases=tuple(entry.transformers for entry in ran), failed=failed,
                          points=points, steps=steps(ran), seconds=f"{sum(e.seconds for e in entries):.0f} s",
                          first=ran[0].transformers, last=ran[-1].transformers,
                          step_text=f"{STEP_SHARE:.0%}".replace("%", " %"),
                          peaks={(peak.row, entry.transformers): peak.tensor_peak_bytes for entry in ran
                                 for peak in entry.rows if not peak.error})
