"""The logs kept beside the rows: `_runs.toml` (one entry per measure run that measured something) and
`_benchmarks.toml` (the tool's own speed and memory, recorded by generator/predict/benchmark.py)."""

from pathlib import Path

from generator.store import documents
from generator.store.files import append_to_log, log_entries
from generator.store.layout import BENCHMARKS_FILE, RUNS_FILE


def _read(path: Path) -> dict:
    return documents.load(path, documents.LOG)


def entries(path: Path, table: str) -> list:
    """A log's entries under one table, through the versioned loader ([] where there is no log yet)."""
    return log_entries(path, table, _read)


def check_runs(folder: Path) -> None:
    """Refuse, before any work, a model folder whose _runs.toml is damaged (a run could not record itself)."""
    entries(folder / RUNS_FILE, "runs")


def record_run(folder: Path, entry: dict) -> Path:
    """Append one measure run's timings to the model folder's _runs.toml."""
    path = folder / RUNS_FILE
    append_to_log(path, "runs", entry, _read)
    return path


def record_benchmark(environment_folder: Path, table: str, entry: dict) -> Path:
    """Append one benchmark run to the environment's _benchmarks.toml, under its table."""
    path = environment_folder / BENCHMARKS_FILE
    append_to_log(path, table, entry, _read)
    return path
