"""The process overhead model of an environment, fitted on its measured rows that carry predictions: how
much a process holds beyond its tensor peak. Both `predict` and the site read it, so it lives in the store,
below them both; torch-free."""

from generator.budget import ProcessModel, process_model
from generator.matrix import DEFAULT_ALLOCATOR
from generator.store import layout
from generator.store.catalog import Catalog
from generator.store.records import ResultsError, RowResult


def measured_pairs(results: list[RowResult], allocator: str = DEFAULT_ALLOCATOR) -> list[tuple[int, int]]:
    """(tensor peak, measured net peak) of every finished, uncapped row under the allocator that carries a
    prediction."""
    return [(r.prediction.tensor_peak_bytes, r.summary.net_peak_bytes) for r in results
            if r.prediction is not None and r.finished and r.row.allocator == allocator]


def overhead_model(catalog: Catalog, environment_id: str, allocator: str = DEFAULT_ALLOCATOR) -> ProcessModel:
    """The overhead under one allocator, fitted on every model's predicted rows of this environment, else of
    the first other one (by folder name) that has enough of them."""
    try:
        folders = layout.environments(catalog.root)
    except ResultsError:
        folders = []
    ordered = sorted(folders, key=lambda folder: folder.name != environment_id)
    for folder in ordered:
        results = catalog.every_result(folder)
        pairs = measured_pairs(results, allocator)
        if len(pairs) >= 3:
            models = sorted({r.model.name for r in results if r.prediction is not None})
            return process_model(pairs, f"{len(pairs)} measured rows of {', '.join(models)} under {allocator} "
                                 f"in {folder.name}")
    return process_model([], "")
