"""`probe`: run one row under a memory cap and report, live, the phase in which it dies.

Without --memory-limit the cap is the midpoint between the step-1 and step-2 peaks that the uncapped row
recorded in this environment: the cap under which a run that survives its first step dies in its second."""

from dataclasses import dataclass
from pathlib import Path

from generator.matrix import Mode, RowSpec
from generator.measure.environment import collect_environment
from generator.model_source import ModelSource
from generator.store import catalog, codec, layout
from generator.store.records import ResultsError, RowResult
from generator.units import MIB, format_size


@dataclass(frozen=True)
class ProbePlan:
    """The capped row to run and why that cap."""

    row: RowSpec
    reason: str


def plan_probe(row: RowSpec, measurements: Path, device: str, memory_limit: int | None,
               model: ModelSource) -> ProbePlan:
    """Choose the cap: the one given, or the midpoint of the uncapped row's step peaks in this environment."""
    if memory_limit:
        return ProbePlan(row.with_limit(memory_limit), "the cap given")
    if row.mode != Mode.TRAIN:
        raise ResultsError(f"probe {row.id}: only training rows have a step 2 to die in; pass --memory-limit")
    environment_id = collect_environment(device).id
    path = layout.row_path(catalog.model_folder(measurements, environment_id, model.name, model.config_sha256), row)
    if not path.is_file():
        raise ResultsError(f"probe {row.id}: no uncapped result at {path}; measure it first or pass --memory-limit")
    twin = codec.load_file(path)
    step1, step2 = twin.summary.step_peaks()
    if not twin.summary.ok or not step1 or step2 <= step1:
        raise ResultsError(f"probe {row.id}: {path} has no step-1 peak below its step-2 peak to aim between")
    cap = (step1 + step2) // 2 // MIB * MIB
    reason = f"midway between its step-1 peak ({format_size(step1)}) and step-2 peak ({format_size(step2)})"
    return ProbePlan(row.with_limit(cap), reason)


def describe_outcome(result: RowResult) -> str:
    """One sentence: how far the capped run got."""
    summary = result.summary
    cap = f"under {format_size(result.row.memory_limit_bytes)} ({summary.memory_limit_method})"
    if summary.ok and summary.peak_rss_bytes > result.row.memory_limit_bytes:
        return (f"{result.row.id}: finished both steps {cap}; its resident peak, "
                f"{format_size(summary.peak_rss_bytes)}, is above the cap because {summary.memory_limit_method} "
                "bounds the memory the process allocates, not the library pages it maps")
    if summary.ok:
        return f"{result.row.id}: finished both steps {cap}; peak {format_size(summary.peak_rss_bytes)}"
    completed = "step 1 completed, then " if summary.phase.startswith("step") else ""
    return f"{result.row.id}: {completed}{summary.status.upper()} in {summary.phase} {cap}: {summary.detail}"
