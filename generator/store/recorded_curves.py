"""Curves a user recorded for a model of their own (`fit --model X --record`), one file per model in
``measurements/<environment>/_curves/<model>.toml``, so that the next `build` offers the model in the fit
page's calculator. Like _fit.toml (generator/store/fit_table.py) they hold tensor peaks and simulated GPU
reserves, which depend on the config and the library versions only: a build reads those recorded under its own
library versions and simulator, from any environment."""

from dataclasses import asdict, dataclass
from pathlib import Path

import tomli_w

from generator.store import documents, layout
from generator.store.files import write_atomic
from generator.store.fit_table import Curve, check_curves, typed_entry
from generator.store.records import ResultsError

RECORDED_FOLDER = "_curves"


@dataclass(frozen=True)
class RecordedCurves:
    """One model's curves, at the lengths recorded, with what they were simulated under."""

    model: str
    config_sha256: str
    libraries: str
    environment: str
    simulator: str
    curves: tuple[Curve, ...]
    search: str = ""  # the search whose batches the curves hold at each card (answers/fit.py SEARCH); "" before

    def lengths(self) -> tuple[int, ...]:
        """The lengths it holds curves at, shortest first."""
        return tuple(sorted({curve.seq_len for curve in self.curves}))


def recorded_path(environment_folder: Path, model: str) -> Path:
    """Where a model's recorded curves live in an environment's folder."""
    return environment_folder / RECORDED_FOLDER / f"{layout.model_folder_name(model)}.toml"


def merged(old: RecordedCurves | None, new: RecordedCurves) -> RecordedCurves:
    """The new recording, keeping the old one's curves at lengths it did not simulate, where both are of the
    same config under the same libraries, simulator and search (else the old curves are stale and are dropped)."""
    if old is None or (old.config_sha256, old.libraries, old.simulator, old.search) != (
            new.config_sha256, new.libraries, new.simulator, new.search):
        return new
    kept = tuple(curve for curve in old.curves if curve.seq_len not in new.lengths())
    ordered = sorted((*kept, *new.curves), key=lambda curve: curve.seq_len)
    return RecordedCurves(**{**asdict(new), "curves": tuple(ordered)})


def save_recorded(recorded: RecordedCurves, environment_folder: Path) -> Path:
    """Write a model's curves, whole or not at all."""
    path = recorded_path(environment_folder, recorded.model)
    document = {"schema_version": documents.RECORDED_CURVES.version, **asdict(recorded)}
    write_atomic(layout.refuse_link(path), tomli_w.dumps(document))
    return path


def load_recorded(path: Path) -> RecordedCurves:
    """One model's recorded curves; refuses what it does not know."""
    document = documents.load(layout.refuse_link(path), documents.RECORDED_CURVES)
    top = {key: document.get(key) for key in ("model", "config_sha256", "libraries", "environment", "simulator")}
    if not all(isinstance(value, str) for value in top.values()) or not isinstance(document.get("search", ""), str):
        raise ResultsError(f"{path}: {', '.join(top)} and search must all be text")
    curves = tuple(typed_entry(Curve, item, path) for item in document.get("curves", []))
    check_curves(curves, path)  # type: ignore[arg-type]
    if not curves or any(curve.model != top["model"] for curve in curves):  # type: ignore[attr-defined]
        raise ResultsError(f"{path}: holds no curves, or curves of another model than {top['model']!r}")
    return RecordedCurves(curves=curves, search=document.get("search", ""), **top)  # type: ignore[arg-type]


def find_recorded(root: Path, libraries: str, simulator: str, search: str) -> tuple[RecordedCurves, ...]:
    """Every model's curves recorded under these library versions, this simulator and this search, in any
    environment of root, by model name (where two environments recorded one name, the one that sorts first)."""
    return tuple(recorded for _, recorded in recorded_files(root, libraries, simulator, search))


def recorded_files(root: Path, libraries: str, simulator: str,
                   search: str) -> tuple[tuple[Path, RecordedCurves], ...]:
    """find_recorded's recordings, each with the file it was read from."""
    found: dict[str, tuple[Path, RecordedCurves]] = {}
    for path in sorted(root.glob(f"*/{RECORDED_FOLDER}/*.toml")) if root.is_dir() else []:
        recorded = load_recorded(path)
        if _under(recorded, libraries, simulator, search):
            found.setdefault(recorded.model, (path, recorded))
    return tuple(found[name] for name in sorted(found))


def stale_recorded(environment_folder: Path, libraries: str, simulator: str, search: str) -> tuple[str, ...]:
    """The models whose curves this environment recorded under other library versions, another simulator or
    another search than the page's table: a build does not offer them until they are recorded again."""
    folder = environment_folder / RECORDED_FOLDER
    paths = sorted(folder.glob("*.toml")) if folder.is_dir() else []
    return tuple(recorded.model for recorded in map(load_recorded, paths)
                 if not _under(recorded, libraries, simulator, search))


def _under(recorded: RecordedCurves, libraries: str, simulator: str, search: str) -> bool:
    """Whether a recording was simulated under these library versions and this simulator, its batches at each
    card chosen by this search: what a build offers."""
    return (recorded.libraries, recorded.simulator, recorded.search) == (libraries, simulator, search)
