"""Memory history across library releases: one file per model, `measurements/_history/<model>.toml`, holding
each release's simulated tensor peaks of the default rows (exact, so any byte of change is real), and the
releases that could not run them with the reason. `memory-budget history` adds or replaces the entry of the
release installed; the versions page draws the history and names the steps."""

from dataclasses import asdict, dataclass
from pathlib import Path

import tomli_w

from generator.categories import CATEGORIES, WORDS, field
from generator.store import documents, plausible
from generator.store.files import write_atomic
from generator.store.layout import model_folder_name
from generator.store.records import ResultsError

HISTORY_SCHEMA_VERSION = documents.HISTORY.version
CATEGORY_FIELDS = {WORDS[category]: field(category) for category in CATEGORIES}  # words -> a prediction's field
HISTORY_FOLDER = "_history"  # side folders start with "_": never an environment


@dataclass(frozen=True)
class RowPeak:
    """One row's simulated tensor peak under a release, split at the peak."""

    row: str
    tensor_peak_bytes: int = 0
    weights_bytes: int = 0
    gradients_bytes: int = 0
    optimizer_bytes: int = 0
    activations_bytes: int = 0
    error: str = ""  # why it could not be simulated


@dataclass(frozen=True)
class ReleaseEntry:
    """One release of transformers (with the torch and peft it ran beside)."""

    transformers: str
    torch: str
    peft: str
    seconds: float
    rows: tuple[RowPeak, ...]
    error: str = ""  # the release could not run at all (an import failed, say)


def history_path(root: Path, model_name: str) -> Path:
    return root / HISTORY_FOLDER / f"{model_folder_name(model_name)}.toml"


def release_key(version: str) -> tuple[int, ...]:
    """'4.57.6' -> (4, 57, 6), for ordering releases."""
    return tuple(int(part) if part.isdigit() else 0 for part in version.split("."))


def load_history(path: Path) -> tuple[ReleaseEntry, ...]:
    """The releases of a history file, oldest first; an absent file is an empty history."""
    if not path.is_file():
        return ()
    document = documents.load(path, documents.HISTORY)
    try:
        entries = [ReleaseEntry(**{**item, "seconds": float(item["seconds"]),
                                   "rows": tuple(RowPeak(**row) for row in item.get("rows", []))})
                   for item in document.get("releases", [])]
    except (TypeError, KeyError) as error:
        raise ResultsError(f"{path}: a release entry is malformed ({error})") from None
    for entry in entries:
        for row in entry.rows:
            _check_row_peak(row, entry.transformers, path)
    return tuple(sorted(entries, key=lambda entry: release_key(entry.transformers)))


def _check_row_peak(row: RowPeak, release: str, path: Path) -> None:
    """A history row's figures: whole byte counts, plausible as a simulation's (store/plausible.py)."""
    where = f"releases.{release}.{row.row}"
    for name in ("tensor_peak_bytes", *plausible.SPLIT):
        value = getattr(row, name)
        if not isinstance(value, int) or isinstance(value, bool):
            raise ResultsError(f"{path}: [{where}] {name} = {value!r} is not a whole number of bytes")
    if not isinstance(row.row, str) or not isinstance(row.error, str):
        raise ResultsError(f"{path}: [{where}] row and error must be text")
    plausible.check_simulated(row, path, where)


def save_release(path: Path, entry: ReleaseEntry) -> Path:
    """Add the release's entry, replacing an older one of the same release."""
    kept = [old for old in load_history(path) if old.transformers != entry.transformers]
    releases = sorted([*kept, entry], key=lambda item: release_key(item.transformers))
    document = {"schema_version": HISTORY_SCHEMA_VERSION, "releases": [asdict(item) for item in releases]}
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, tomli_w.dumps(document))
    return path
