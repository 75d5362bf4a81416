"""The one owner of result files on disk: where a row's file lives, which environments and models a
measurements folder holds, loading them strictly, and whether two results may be compared.

Layout: ``measurements/<environment>/<model>/<row>.toml``, with ``_runs.toml`` beside the rows. The
environment id says which libraries and which machine; the model folder keeps each model's rows apart, so a
GPT-2 config and SmolLM2 measured on one set-up never overwrite or shadow each other. Folders written before
models had their own folder (rows directly under the environment) still load, as that environment's one model.

Two results are comparable when every key in CHECKED_KEYS agrees, in the spirit of pyperf's checked
metadata; environments may differ, and ENVIRONMENT_KEYS lists what is reported when they do."""

import re
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from generator.environment import Environment
from generator.results import METHOD_VERSION, ResultsError, RowResult, load_file

RUNS_FILE = "_runs.toml"
# What must agree for two results of one row to be compared: the row's definition, the model's architecture,
# the file format, and the measuring method (bumped whenever the harness changes what a figure means).
CHECKED_KEYS = ("row", "model.config_sha256", "schema_version", "method_version")
# The libraries a diff is about, and everything else about a set-up that it reports when it differs.
LIBRARY_KEYS = ("torch", "transformers", "peft")
ENVIRONMENT_KEYS = ("python", "device", "device_name", "cpu", "cpu_features", "cpu_count", "total_memory_bytes",
                    "os", "machine")


def model_folder_name(model_name: str) -> str:
    """A model's folder: its name with anything but letters, digits, '.', '-' and '_' replaced."""
    return re.sub(r"[^A-Za-z0-9._-]", "_", model_name).strip(".") or "model"


def model_folder(root: Path, environment_id: str, model_name: str) -> Path:
    """Where one model's rows of one environment live."""
    return root / environment_id / model_folder_name(model_name)


def row_files(folder: Path) -> list[Path]:
    """Row files in a folder: *.toml, leaving out the run log (_*.toml) and hidden files."""
    return sorted(p for p in folder.glob("*.toml") if not p.name.startswith(("_", ".")))


def is_current(path: Path, config_sha256: str) -> bool:
    """Whether a row's file already holds this model's result, measured by the current method."""
    if not path.is_file():
        return False
    try:
        result = load_file(path)
    except ResultsError:
        return False  # unreadable: measure it again rather than trust it
    return result.method_version == METHOD_VERSION and result.model.config_sha256 == config_sha256


class UnknownModelError(ResultsError):
    """An environment that holds no rows of the model asked for."""


@dataclass(frozen=True)
class Selection:
    """One model's rows in one environment: what build and diff read."""

    environment: str
    model: str
    folder: Path
    results: tuple[RowResult, ...]


def environments(root: Path) -> list[Path]:
    """Environment folders under a measurements folder that hold rows (directly or in model folders)."""
    if not root.is_dir():
        raise ResultsError(f"{root}: no such measurements folder")
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith(".") and _model_folders(p))


def _model_folders(environment: Path) -> list[Path]:
    if row_files(environment):
        return [environment]  # the layout before model folders
    return sorted(p for p in environment.iterdir() if p.is_dir() and row_files(p))


def resolve_environment(root: Path, text: str) -> Path:
    """An environment given as a folder path or as an id under root."""
    for candidate in (Path(text), root / text):
        if candidate.is_dir() and _model_folders(candidate):
            return candidate
    known = ", ".join(p.name for p in environments(root)) if root.is_dir() else ""
    raise ResultsError(f"{root}: no environment {text!r}, as a folder or an id (known: {known or 'none'})")


def select_all(environment: Path) -> list[Selection]:
    """Every model's rows of an environment, each folder loaded once."""
    selections = []
    for folder in _model_folders(environment):
        results = load_folder(folder)
        selections.append(Selection(environment=results[0].environment.id, model=_model_name(results),
                                    folder=folder, results=tuple(results)))
    return selections


def select(environment: Path, model: str | None) -> Selection:
    """One model's rows of an environment: the one named, the only one, or the shipped default model."""
    from generator.model_source import DEFAULT_MODEL

    selections = select_all(environment)
    if not selections:
        raise ResultsError(f"{environment}: holds no result files; run `memory-budget measure` first")
    by_name = {selection.model: selection for selection in selections}
    wanted = model or (selections[0].model if len(selections) == 1 else DEFAULT_MODEL)
    found = by_name.get(wanted) or next((s for s in selections if s.folder.name == model_folder_name(wanted)),
                                        None)
    if found is None:
        raise UnknownModelError(f"{environment}: no results for model {wanted!r} (known: {', '.join(sorted(by_name))})")
    return found


def _model_name(results: list[RowResult]) -> str:
    return next((r.model.name for r in results if r.row.mode != "baseline"), results[0].model.name)


def load_folder(folder: Path) -> list[RowResult]:
    """Every row of one model folder; refuses an empty folder and one that mixes environments or models."""
    files = row_files(folder)
    if not files:
        raise ResultsError(f"{folder}: holds no result files")
    results = [load_file(path) for path in files]
    environment_ids = sorted({result.environment.id for result in results})
    if len(environment_ids) > 1:
        raise ResultsError(f"{folder}: mixes environments ({', '.join(environment_ids)}); "
                           "keep one environment per folder")
    environment_folder = folder if _is_legacy(folder) else folder.parent
    if environment_folder.name != environment_ids[0] and environment_folder.name.startswith(("cpu-", "cuda-")):
        raise ResultsError(f"{folder}: holds results of environment {environment_ids[0]!r}; "
                           "the folder must carry the environment's id")
    models = sorted({(r.model.name, r.model.config_sha256) for r in results if r.row.mode != "baseline"})
    if len(models) > 1:
        raise ResultsError(f"{folder}: mixes models ({', '.join(name for name, _ in models)})")
    return results


def _is_legacy(folder: Path) -> bool:
    """An environment folder holding rows itself, as written before models had folders of their own."""
    return folder.name.startswith(("cpu-", "cuda-"))


def library_versions(environment: Environment) -> tuple[Version, ...]:
    """torch, transformers and peft versions, comparable; an unreadable version sorts first."""
    def parse(text: str) -> Version:
        try:
            return Version(text)
        except InvalidVersion:
            return Version("0")
    return tuple(parse(getattr(environment, key)) for key in LIBRARY_KEYS)


def newest(selections: list[Selection]) -> Selection:
    """The selection with the newest library versions (then the newest measurement)."""
    return max(selections, key=lambda s: (library_versions(s.results[0].environment),
                                          max(r.measured_at for r in s.results)))


def comparable(before: RowResult, after: RowResult) -> str:
    """'' when two results of a row may be compared, else the first reason they may not."""
    checks: dict[str, tuple[object, object]] = {
        "row": (before.row, after.row),
        "model.config_sha256": (before.model.config_sha256, after.model.config_sha256),
        "schema_version": (before.schema_version, after.schema_version),
        "method_version": (before.method_version, after.method_version),
    }
    for key in CHECKED_KEYS:
        old, new = checks[key]
        if old != new:
            shown = (str(old)[:12], str(new)[:12]) if key == "model.config_sha256" else (old, new)
            return f"{key} differs ({shown[0]} against {shown[1]})"
    return ""


def environment_differences(before: Environment, after: Environment) -> list[tuple[str, str, str]]:
    """(key, before, after) for every non-library key of two set-ups that differs."""
    return [(key, str(getattr(before, key)), str(getattr(after, key))) for key in ENVIRONMENT_KEYS
            if getattr(before, key) != getattr(after, key)]
