"""The process overhead model of an environment, fitted on its measured rows that carry predictions: how
much a process holds beyond its tensor peak. Torch-free, so that build can use it."""

from pathlib import Path

from generator import store
from generator.budget import ProcessModel, process_model
from generator.results import ResultsError, RowResult


def measured_pairs(results: list[RowResult]) -> list[tuple[int, int]]:
    """(tensor peak, measured net peak) of every finished, uncapped row that carries a prediction."""
    return [(r.prediction.tensor_peak_bytes, r.summary.net_peak_bytes) for r in results
            if r.prediction is not None and r.summary.ok and r.row.mode != "baseline"
            and not r.row.memory_limit_bytes]


def overhead_model(measurements: Path, environment_id: str) -> ProcessModel:
    """The overhead fitted on every model's predicted rows of this environment, else of the newest one."""
    try:
        folders = store.environments(measurements)
    except ResultsError:
        folders = []
    ordered = sorted(folders, key=lambda folder: folder.name != environment_id)
    for folder in ordered:
        results = [r for selection in store.select_all(folder) for r in selection.results]
        pairs = measured_pairs(results)
        if len(pairs) >= 3:
            models = sorted({r.model.name for r in results if r.prediction is not None})
            return process_model(pairs, f"{len(pairs)} measured rows of {', '.join(models)} in {folder.name}")
    return process_model([], "")
