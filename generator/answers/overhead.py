"""The process overhead model, fitted on measured rows that carry predictions: how much a process holds beyond
its tensor peak. Both `predict`/`fit` and the site read it, through one rule (``overhead_source``), so it lives
in the store, below them both; torch-free.

The rule, for an environment (this machine's, or the page's) and an allocator:
1. the environment's own rows, where it has three or more predicted rows under that allocator;
2. else the environment with the same library versions and the newest such rows, said so (borrowed);
3. else none: no overhead is modelled."""

from dataclasses import dataclass
from pathlib import Path

from generator.budget import ProcessModel, process_model
from generator.matrix import DEFAULT_ALLOCATOR
from generator.store import layout
from generator.store.catalog import Catalog
from generator.store.comparability import LIBRARY_KEYS
from generator.store.environment import Environment
from generator.store.records import ResultsError, RowResult

MIN_PAIRS = 3


def measured_pairs(results: list[RowResult], allocator: str = DEFAULT_ALLOCATOR) -> list[tuple[int, int]]:
    """(tensor peak, measured net peak) of every finished, uncapped row under the allocator that carries a
    prediction."""
    return [(r.prediction.tensor_peak_bytes, r.summary.net_peak_bytes) for r in results
            if r.prediction is not None and r.finished and r.row.allocator == allocator]


@dataclass(frozen=True)
class OverheadSource:
    """Where the process model comes from: an environment folder, and whether it is borrowed from another."""

    folder: Path
    borrowed: bool


def _same_libraries(first: Environment, second: Environment) -> bool:
    return all(getattr(first, key) == getattr(second, key) for key in LIBRARY_KEYS)


def overhead_source(catalog: Catalog, environment: Environment,
                    allocator: str = DEFAULT_ALLOCATOR) -> OverheadSource | None:
    """The one rule: this environment's rows under the allocator, else the newest environment with the same
    library versions that has them, else None."""
    candidates = []
    for folder in _environments(catalog):
        results = catalog.every_result(folder)
        usable = [r for r in results if r.prediction is not None and r.finished and r.row.allocator == allocator]
        if len(usable) < MIN_PAIRS:
            continue
        if folder.name == environment.id:
            return OverheadSource(folder, borrowed=False)
        if _same_libraries(results[0].environment, environment):
            candidates.append((max(r.measured_at for r in usable), folder.name, folder))
    return OverheadSource(max(candidates)[2], borrowed=True) if candidates else None


def _environments(catalog: Catalog) -> list[Path]:
    """The catalog's environment folders; none where its root is not a measurements folder."""
    try:
        return layout.environments(catalog.root)
    except ResultsError:
        return []


def same_library_folders(catalog: Catalog, environment: Environment) -> list[Path]:
    """Every environment folder whose rows were measured with these library versions."""
    return [folder for folder in _environments(catalog)
            if _same_libraries(catalog.every_result(folder)[0].environment, environment)]


def overhead_model(catalog: Catalog, environment: Environment, allocator: str = DEFAULT_ALLOCATOR) -> ProcessModel:
    """The overhead under one allocator, fitted on every model's predicted rows of the environment the rule
    picks; a borrowed model says so in its source."""
    found = overhead_source(catalog, environment, allocator)
    if found is None:
        return process_model([], "")
    results = catalog.every_result(found.folder)
    pairs = measured_pairs(results, allocator)
    models = sorted({r.model.name for r in results if r.prediction is not None})
    source = f"{len(pairs)} measured rows of {', '.join(models)} under {allocator} in {found.folder.name}"
    if found.borrowed:
        source += (f", borrowed: {environment.id} has no such rows, and {found.folder.name} has the same "
                   "library versions")
    return process_model(pairs, source)
