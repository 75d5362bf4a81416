"""A measurements folder as the commands read it: environments, their models, and their rows, each file
loaded once per command however many times a command asks for it.

``Catalog(root)`` is made once per command and handed to whatever needs rows (the article, the versions page,
the fit page, the overhead model), so a build parses every result file exactly once."""

import hashlib
from dataclasses import dataclass
from pathlib import Path

from packaging.version import InvalidVersion, Version

from generator.matrix import Mode, default_matrix
from generator.model_source import DEFAULT_MODEL
from generator.store import codec, layout
from generator.store.comparability import LIBRARY_KEYS
from generator.store.environment import Environment
from generator.store.records import METHOD_VERSION, Repeat, ResultsError, RowResult, same_method


class UnknownModelError(ResultsError):
    """An environment that holds no rows of the model asked for."""


@dataclass(frozen=True)
class Selection:
    """One model's rows in one environment: what build and diff read."""

    environment: str
    model: str
    folder: Path
    results: tuple[RowResult, ...]


class Catalog:
    """The folders of one measurements root, each loaded at most once."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._folders: dict[Path, tuple[RowResult, ...]] = {}

    def load_folder(self, folder: Path) -> tuple[RowResult, ...]:
        """Every row of one model folder; refuses an empty folder and one that mixes environments or models."""
        key = folder.resolve()
        if key not in self._folders:
            self._folders[key] = load_folder(folder)
        return self._folders[key]

    def select_all(self, environment: Path) -> list[Selection]:
        """Every model's rows of an environment."""
        selections = []
        for folder in layout.model_folders(environment):
            results = self.load_folder(folder)
            selections.append(Selection(environment=results[0].environment.id, model=_model_name(results),
                                        folder=folder, results=results))
        return selections

    def select(self, environment: Path, model: str | None) -> Selection:
        """One model's rows of an environment: the one named, the only one, or the shipped default model."""
        selections = self.select_all(environment)
        if not selections:
            raise ResultsError(f"{environment}: holds no result files; run `memory-budget measure` first")
        by_name = {selection.model: selection for selection in selections}
        wanted = model or (DEFAULT_MODEL if DEFAULT_MODEL in by_name else  # else the most rows, ties by name
                           min(selections, key=lambda s: (-len(s.results), s.folder.name)).model)
        found = next((s for s in selections if s.folder.name == wanted), None) or by_name.get(wanted) or next(
            (s for s in selections if s.folder.name == layout.model_folder_name(wanted)), None)
        if found is None:
            raise UnknownModelError(f"{environment}: no results for model {wanted!r} "
                                    f"(known: {', '.join(sorted(by_name))})")
        return found

    def try_select(self, environment: Path, model: str | None) -> Selection | None:
        """As select, or None where the environment holds no rows of that model."""
        try:
            return self.select(environment, model)
        except UnknownModelError:
            return None

    def every_result(self, environment: Path) -> list[RowResult]:
        """Every model's rows of an environment, in one list."""
        return [result for selection in self.select_all(environment) for result in selection.results]


def _model_name(results: tuple[RowResult, ...]) -> str:
    return next((r.model.name for r in results if r.row.mode != Mode.BASELINE), results[0].model.name)


def load_folder(folder: Path) -> tuple[RowResult, ...]:
    """Every row of one model folder, read from disk (a Catalog calls this once per folder)."""
    files = layout.row_files(folder)
    if not files:
        raise ResultsError(f"{folder}: holds no result files")
    results = tuple(codec.load_file(path) for path in files)
    environment_ids = sorted({result.environment.id for result in results})
    if len(environment_ids) > 1:
        raise ResultsError(f"{folder}: mixes environments ({', '.join(environment_ids)}); "
                           "keep one environment per folder")
    environment_folder = layout.environment_folder(folder)
    if environment_folder.name != environment_ids[0] and layout.is_legacy(environment_folder):
        raise ResultsError(f"{folder}: holds results of environment {environment_ids[0]!r}; "
                           "the folder must carry the environment's id")
    models = sorted({(r.model.name, r.model.config_sha256) for r in results if r.row.mode != Mode.BASELINE})
    if len(models) > 1:
        raise ResultsError(f"{folder}: mixes models ({', '.join(name for name, _ in models)})")
    return results


def folder_owner(folder: Path) -> tuple[str, str] | None:
    """The model (name, config hash) whose rows a model folder holds; None where it holds no readable row."""
    files = layout.row_files(folder) if folder.is_dir() else []
    for path in sorted(files, key=lambda p: p.stem == "baseline"):  # a model's own rows first
        try:
            model = codec.load_file(path).model
        except ResultsError:
            continue  # a damaged row is measured again; the other rows say whose folder this is
        return model.name, model.config_sha256
    return None


def model_folder(root: Path, environment_id: str, name: str, config_sha256: str) -> Path:
    """Where one model's rows of one environment live: the folder named after the model, or, where that folder
    holds another config's rows (two files named config.json, or names that read alike once made safe), the
    name plus a short hash of the model's name and config. Never a folder holding another model's rows."""
    base = layout.model_folder(root, environment_id, name)
    suffix = hashlib.sha256(f"{name}\n{config_sha256}".encode()).hexdigest()[:8]
    for folder in (base, base.with_name(f"{base.name}-{suffix}")):
        if folder_owner(folder) in (None, (name, config_sha256)):
            return folder
    raise ResultsError(f"{base}: holds rows of another model, and so does {base.name}-{suffix}; "
                       "refusing to write over them")


def is_current(path: Path, config_sha256: str, repeats: int = 1) -> bool:
    """Whether a row's file already holds this model's finished result, measured by the current method, with the
    repeats asked for (or a note saying why it has fewer). A failed row is measured again, and a row that a
    stopped run left short of its repeats is completed (partial_repeats)."""
    result = _current(path, config_sha256)
    return result is not None and (len(result.repeats) >= repeats or bool(result.summary.repeats_note))


def partial_repeats(path: Path, config_sha256: str) -> tuple[Repeat, ...]:
    """The finished repeats of this model's current row, which a rerun completes rather than repeats; () where
    the file is missing, unreadable, failed, of another model or of an older method."""
    result = _current(path, config_sha256)
    return result.repeats if result is not None else ()


def _current(path: Path, config_sha256: str) -> RowResult | None:
    if not path.is_file():
        return None
    try:
        result = codec.load_file(path)
    except ResultsError:
        return None  # unreadable: measure it again rather than trust it
    current = (same_method(result.row.mode, result.method_version, METHOD_VERSION)
               and result.model.config_sha256 == config_sha256 and result.summary.ok)
    return result if current else None


def library_versions(environment: Environment) -> tuple[Version, ...]:
    """torch, transformers and peft versions, comparable; an unreadable version sorts first."""
    def parse(text: str) -> Version:
        try:
            return Version(text)
        except InvalidVersion:
            return Version("0")
    return tuple(parse(getattr(environment, key)) for key in LIBRARY_KEYS)


def holds_default_matrix(selection: Selection) -> bool:
    """Whether every row of the default matrix was measured for this model here (finished or failed)."""
    return {row.id for row in default_matrix()} <= {result.row.id for result in selection.results}


def newest(selections: list[Selection]) -> Selection:
    """The selection with the newest library versions, then one that holds the whole default matrix (a few rows
    measured on another machine, say bitsandbytes' set-ups where it runs, never take the article from a full
    matrix), then the newest measurement."""
    return max(selections, key=lambda s: (library_versions(s.results[0].environment), holds_default_matrix(s),
                                          max(r.measured_at for r in s.results)))
