"""How a row's repeats combine into its summary, driven by the figures' declarations (records.Figures)."""

import statistics
from collections.abc import Mapping, Sequence
from typing import Any

from generator.store.records import FIRST, MAX, Repeat, Summary, declared


def combine(how: str, values: Sequence[Any]) -> Any:
    """Combine one figure's values over repeats: the median (an int for int figures), the max, or the first.
    Per-phase figures combine phase by phase, over the phases every repeat recorded."""
    first = values[0]
    if isinstance(first, Mapping):
        keys = [key for key in first if all(key in value for value in values)]
        return {key: combine(how, [value[key] for value in values]) for key in keys}
    if how == FIRST:
        return first
    if how == MAX:
        return max(values)
    middle = statistics.median(values)
    return int(middle) if isinstance(first, int) else middle


def combined(repeats: Sequence[Repeat]) -> dict[str, Any]:
    """Every declared figure, combined over these repeats."""
    return {spec.name: combine(spec.metadata["combine"], [getattr(r, spec.name) for r in repeats])
            for spec in declared()}


def summarize(repeats: list[Repeat], memory_limit_method: str = "", repeats_note: str = "") -> Summary:
    """The declared figures over the finished repeats; a row with any failed repeat takes that failure's
    status, phase and figures."""
    failed = [repeat for repeat in repeats if repeat.status != "ok"]
    if failed:
        first = failed[0]
        return Summary(status=first.status, phase=first.phase, detail=first.detail,
                       steps_seconds=sum(first.step_seconds), memory_limit_method=memory_limit_method,
                       **combined([first]))
    nets = [repeat.net_peak_bytes for repeat in repeats]
    return Summary(status="ok", net_peak_bytes=int(statistics.median(nets)), net_peak_min_bytes=min(nets),
                   net_peak_max_bytes=max(nets), repeats_note=repeats_note,
                   steps_seconds=statistics.median(sum(r.step_seconds) for r in repeats),
                   memory_limit_method=memory_limit_method, **combined(repeats))
