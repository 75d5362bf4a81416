"""`prune`: which environment folders of a measurements folder may be retired, by one rule, and their removal.

Environments pile up: each machine and each library release measured gets a folder. A folder is retired only
where nothing is lost, so the rule keeps a folder that
1. holds the curves the fit page and `fit` read (``_fit.toml``, ``_curves/``);
2. is the newest environment of its release (its torch, transformers and peft, on its device): the last one of a
   release is never retired;
3. holds a finished row (model and row id) that no newer environment of its release holds, also finished;
   where its machine measured other releases too, only a newer environment on that machine counts, so the
   versions page keeps its same-machine comparison;
4. holds anything this tool does not write (a file that is not TOML, a folder that is not a model's rows).
Every other folder is superseded by a newer one of its release, named in the plan. A folder without rows (a
benchmarks file alone) is not an environment here and is left alone."""

import shutil
from dataclasses import dataclass
from pathlib import Path

from generator.store import layout
from generator.store.catalog import Catalog
from generator.store.comparability import same_machine
from generator.store.environment import Environment
from generator.store.layout import FIT_FILE
from generator.store.recorded_curves import RECORDED_FOLDER
from generator.store.records import RowResult


@dataclass(frozen=True)
class Decision:
    """One environment folder: retired or kept, and why."""

    folder: Path
    retired: bool
    reason: str


@dataclass(frozen=True)
class _Held:
    folder: Path
    environment: Environment
    newest: str  # the latest measured_at of its rows (ISO 8601, so text order is time order)
    rows: frozenset[tuple[str, str]]  # (model, row id) of its finished rows


def _release(environment: Environment) -> tuple[str, str, str, str]:
    return environment.device, environment.torch, environment.transformers, environment.peft


def _held(folder: Path, results: list[RowResult]) -> _Held:
    return _Held(folder=folder, environment=results[0].environment, newest=max(r.measured_at for r in results),
                 rows=frozenset((r.model.name, r.row.id) for r in results if r.summary.ok))


def _foreign(folder: Path) -> list[str]:
    """What in an environment folder this tool does not write: anything but TOML files and model folders of them."""
    found = []
    for path in sorted(folder.rglob("*")):
        inside = path.relative_to(folder)
        if path.is_symlink() or (path.is_file() and path.suffix != ".toml") or len(inside.parts) > 2:
            found.append(str(inside))
    return found


def _decide(held: _Held, every: list[_Held]) -> Decision:
    folder = held.folder
    if (folder / FIT_FILE).exists() or (folder / RECORDED_FOLDER).exists():
        return Decision(folder, False, f"holds the curves the fit page and fit read ({FIT_FILE} or {RECORDED_FOLDER}/)")
    newer = [other for other in every if _release(other.environment) == _release(held.environment)
             and other.newest > held.newest]
    if not newer:
        return Decision(folder, False, "the newest environment of its release")
    machine_releases = {_release(o.environment) for o in every if same_machine(o.environment, held.environment)}
    if len(machine_releases) > 1:  # the versions page compares this machine's releases: keep one of each
        newer = [other for other in newer if same_machine(other.environment, held.environment)]
    covering = next((other for other in sorted(newer, key=lambda o: o.newest, reverse=True)
                     if held.rows <= other.rows), None)
    if covering is None:
        return Decision(folder, False, "holds finished rows no newer environment of its release holds")
    foreign = _foreign(folder)
    if foreign:
        return Decision(folder, False, f"holds what this tool does not write: {', '.join(foreign[:3])}")
    return Decision(folder, True, f"superseded by {covering.folder.name}, which holds every row it holds")


def prune_plan(root: Path) -> list[Decision]:
    """Every environment folder of root that holds rows, with the rule's decision."""
    catalog = Catalog(root)
    every = [_held(folder, results) for folder in layout.environments(root)
             if (results := catalog.every_result(folder))]
    return [_decide(held, every) for held in every]


def retire(decisions: list[Decision]) -> list[Path]:
    """Remove the retired folders, each checked again just before it goes; the folders removed."""
    removed = []
    for decision in decisions:
        if decision.retired and not _foreign(decision.folder):
            shutil.rmtree(decision.folder)
            removed.append(decision.folder)
    return removed
