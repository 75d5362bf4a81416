"""The process overhead model, fitted on measured rows that carry predictions: how much a process holds beyond
its tensor peak. Both `predict`/`fit` and the site read it, through one rule (``overhead_source``), so it lives
in the store, below them both; torch-free.

The rule, for an environment (this machine's, or the page's) and an allocator:
1. the environment's own rows, where it has three or more predicted rows under that allocator;
2. else the environment with the same library versions and the newest such rows, said so (borrowed);
3. else the nearest measured release's (the same machine first, then the nearest transformers release, then the
   newest rows), said so, with its spread: how far its model fell short of the rows of the other releases that
   were measured, which fit's margin then widens by (answers/margin.py);
4. else none: no overhead is modelled, and fit keeps the widest band any environment validated.
Where the measurements folder holds no rows (a user's own folder, outside the checkout), the rows read are the
ones shipped with the tool (store/layout.py reading_root)."""

from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from generator.budget import ProcessModel, process_model
from generator.matrix import DEFAULT_ALLOCATOR
from generator.store import layout
from generator.store.catalog import Catalog
from generator.store.comparability import LIBRARY_KEYS, same_machine
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
    """Where the process model comes from: an environment folder, whether it is borrowed from another, and under
    another release how far that model fell short of other releases' rows (0.05: a row 5 % over its answer)."""

    folder: Path
    borrowed: bool
    release: str = ""  # the borrowed model's transformers where it is another release's; '' otherwise
    spread: float = 0.0


def _same_libraries(first: Environment, second: Environment) -> bool:
    return all(getattr(first, key) == getattr(second, key) for key in LIBRARY_KEYS)


def overhead_source(catalog: Catalog, environment: Environment,
                    allocator: str = DEFAULT_ALLOCATOR) -> OverheadSource | None:
    """The one rule (the module's): this environment's rows under the allocator, else the newest environment
    with the same library versions that has them, else the nearest measured release's, else None."""
    same, other = [], []
    for folder in _environments(catalog):
        results = catalog.every_result(folder)
        usable = [r for r in results if r.prediction is not None and r.finished and r.row.allocator == allocator]
        if len(usable) < MIN_PAIRS:
            continue
        if folder.name == environment.id:
            return OverheadSource(folder, borrowed=False)
        newest = max(r.measured_at for r in usable)
        if _same_libraries(results[0].environment, environment):
            same.append((newest, folder.name, folder))
        else:
            found = results[0].environment
            other.append((not same_machine(found, environment),
                          _release_distance(found.transformers, environment.transformers), newest, folder))
    if same:
        return OverheadSource(max(same)[2], borrowed=True)
    if not other:
        return None
    best = min((elsewhere, distance) for elsewhere, distance, _, _ in other)  # the same machine, the nearest release
    nearest = max((newest, folder.name, folder) for *key, newest, folder in other if tuple(key) == best)[2]
    release = catalog.every_result(nearest)[0].environment.transformers
    return OverheadSource(nearest, borrowed=True, release=release,
                          spread=release_spread(catalog, nearest, [item[3] for item in other], allocator))


def _release_distance(found: str, wanted: str) -> tuple:
    """How near a measured release is to the one wanted: the newest release at or below it first (its code is
    the nearest ancestor), then the oldest above it; an unknown version last."""
    try:
        have, want = Version(found), Version(wanted)
    except InvalidVersion:
        return (2,)
    return (0, tuple(-part for part in have.release)) if have <= want else (1, have.release)


def release_spread(catalog: Catalog, source: Path, folders: list[Path], allocator: str) -> float:
    """How far the source folder's process model fell short of the measured rows of the other releases'
    folders: the largest measured / expected - 1 over them, 0 where it never did."""
    model = _fitted(catalog, source, allocator)
    mine = catalog.every_result(source)[0].environment.transformers
    worst = 0.0
    for folder in folders:
        if folder == source or catalog.every_result(folder)[0].environment.transformers == mine:
            continue
        for tensor, measured in measured_pairs(catalog.every_result(folder), allocator):
            worst = max(worst, measured / max(model.expected(tensor), 1) - 1)
    return worst


def _fitted(catalog: Catalog, folder: Path, allocator: str) -> ProcessModel:
    return process_model(measured_pairs(catalog.every_result(folder), allocator), folder.name)


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
    if found.borrowed and found.release:
        source += (f", borrowed: {environment.id} has no such rows and no environment has its library versions; "
                   f"{found.folder.name} is the nearest measured release (transformers {found.release}), whose "
                   f"model fell short of other releases' rows by up to {found.spread:.1%}")
    elif found.borrowed:
        source += (f", borrowed: {environment.id} has no such rows, and {found.folder.name} has the same "
                   "library versions")
    return process_model(pairs, source)
