"""Where things live in a measurements folder: ``<environment>/<model>/<row>.toml``, with the side files
(``_runs.toml``, ``_benchmarks.toml`` beside the rows or the environment, ``_fit.toml`` in the environment).

The environment id says which libraries and which machine; the model folder keeps each model's rows apart, so
a GPT-2 config and SmolLM2 measured on one set-up never overwrite or shadow each other. Folders written before
models had their own folder (rows directly under the environment) still load, as that environment's one
model."""

import re
from importlib import resources
from pathlib import Path

from generator.matrix import RowSpec
from generator.store.records import ResultsError

RUNS_FILE = "_runs.toml"
FIT_FILE = "_fit.toml"
BENCHMARKS_FILE = "_benchmarks.toml"
GPU_CONTEXT_FILE = "_gpu_context.toml"  # a GPU environment's measured context (generator/store/gpu_context.py)
ENVIRONMENT_PREFIXES = ("cpu-", "cuda-")


def model_folder_name(model_name: str) -> str:
    """A model's folder: its name with anything but letters, digits, '.', '-' and '_' replaced; one that would
    then start with '_' (a name of control characters, say) is put after 'model', since a folder or file named
    '_...' is the tool's own (_fit.toml, _curves/) and is skipped where rows are read."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", model_name).strip(".")
    return f"model{name}" if name.startswith("_") else name or "model"


def model_folder(root: Path, environment_id: str, model_name: str) -> Path:
    """Where one model's rows of one environment live."""
    return root / environment_id / model_folder_name(model_name)


def row_path(folder: Path, row: RowSpec) -> Path:
    """A row's file in a model folder: its id is its name."""
    return folder / f"{row.id}.toml"


def refuse_link(path: Path) -> Path:
    """A path inside a measurements folder, refused where it is a link: a link leads out of the folder (rows that
    are not in it) or to a second name for something in it (an environment or a row read twice)."""
    if path.is_symlink():
        raise ResultsError(f"{path}: is a link (to {path.readlink()}); a measurements folder holds its files "
                           "themselves, so that no row is read from outside it or twice")
    return path


def row_files(folder: Path) -> list[Path]:
    """Row files in a folder: *.toml, leaving out the side files (_*.toml) and hidden files; links refused."""
    return sorted(refuse_link(p) for p in folder.glob("*.toml") if not p.name.startswith(("_", ".")))


def is_legacy(folder: Path) -> bool:
    """An environment folder holding rows itself, as written before models had folders of their own."""
    return folder.name.startswith(ENVIRONMENT_PREFIXES)


def environment_folder(model_folder_path: Path) -> Path:
    """The environment folder of a model folder (itself, for the layout before model folders)."""
    return model_folder_path if is_legacy(model_folder_path) else model_folder_path.parent


def model_folders(environment: Path) -> list[Path]:
    """The folders of an environment that hold rows: its model folders, or itself in the older layout."""
    if row_files(environment):
        return [environment]
    return sorted(p for p in environment.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
                  and row_files(refuse_link(p)))


def environments(root: Path) -> list[Path]:
    """Environment folders under a measurements folder that hold rows (directly or in model folders)."""
    if not root.is_dir():
        raise ResultsError(f"{root}: no such measurements folder")
    return sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))
                  and model_folders(refuse_link(p)))


def shipped_measurements() -> Path:
    """The measurements the tool was built with: a wheel's copy (generator/_measurements/), or an editable
    install's checkout's measurements/."""
    package = Path(str(resources.files("generator")))
    for candidate in (package / "_measurements", package.parent / "measurements"):
        if candidate.is_dir():
            return candidate
    return package / "_measurements"


SHIPPED_NOTE = ", read from the measurements shipped with memory-budget (the folder given holds no rows)"


def reading_root(measurements: Path) -> tuple[Path, str]:
    """Where the answers read measured rows from (the process model, the margin): the measurements folder
    given, where it holds an environment's rows, else the measurements shipped with the tool, so that the tool
    answers the same from any working folder; with what to say of it ('' or SHIPPED_NOTE)."""
    try:
        if environments(measurements):
            return measurements, ""
    except ResultsError:
        pass
    return shipped_measurements(), SHIPPED_NOTE


def resolve_environment(root: Path, text: str) -> Path:
    """An environment given as a folder path or as an id under root; a link is refused, as environments() and
    build refuse it, so that diff reads no environment the page would not (refuse_link)."""
    for candidate in (Path(text), root / text):
        if candidate.is_dir() and model_folders(refuse_link(candidate)):
            return candidate
    known = ", ".join(p.name for p in environments(root)) if root.is_dir() else ""
    raise ResultsError(f"{root}: no environment {text!r}, as a folder or an id (known: {known or 'none'})")


def jobs_folder(root: Path, model_name: str) -> Path:
    """Where a model's cluster jobs keep their submitit files and worker state (shared with the nodes)."""
    return root / ".jobs" / model_folder_name(model_name)


def remembered_environments(jobs: Path) -> list[str]:
    """The environments (node types) that cluster jobs of this model have reported, oldest first."""
    path = jobs / "environments.txt"
    return path.read_text(encoding="utf-8").split() if path.is_file() else []


def remember_environment(jobs: Path, environment_id: str) -> None:
    """Note a node type that a job reported, so that a rerun looks for finished rows in its folder."""
    known = remembered_environments(jobs)
    if environment_id not in known:
        jobs.mkdir(parents=True, exist_ok=True)
        (jobs / "environments.txt").write_text(" ".join([*known, environment_id]) + "\n", encoding="utf-8")


def fit_files(root: Path) -> list[Path]:
    """Every environment's fit curves under a measurements folder."""
    return sorted(root.glob(f"*/{FIT_FILE}")) if root.is_dir() else []


def recorded_row_files(root: Path, row: RowSpec) -> list[Path]:
    """Every file of this row in any environment and model under root, oldest first (by modification time)."""
    found = [*root.glob(f"*/*/{row.id}.toml"), *root.glob(f"*/{row.id}.toml")]
    return sorted(found, key=lambda path: path.stat().st_mtime)
