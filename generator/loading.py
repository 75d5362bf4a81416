"""Find and load one environment's result files from a measurements folder, strictly."""

from pathlib import Path

from generator.results import ResultsError, RowResult, load_file


def result_files(folder: Path) -> list[Path]:
    """Row files in a folder: *.toml, leaving out the run benchmark (_*.toml) and hidden files."""
    return sorted(p for p in folder.glob("*.toml") if not p.name.startswith(("_", ".")))


def choose_environment(measurements: Path, env: str | None) -> Path:
    """The folder to build from: the named environment, the folder itself if it holds results, or the newest."""
    if not measurements.is_dir():
        raise ResultsError(f"{measurements}: no such measurements folder")
    if env is not None:
        folder = measurements / env
        if not folder.is_dir():
            known = ", ".join(sorted(p.name for p in measurements.iterdir() if p.is_dir())) or "none"
            raise ResultsError(f"{measurements}: no environment {env!r} (known: {known})")
        return folder
    if result_files(measurements):
        return measurements
    candidates = [p for p in measurements.iterdir() if p.is_dir() and result_files(p)]
    if not candidates:
        raise ResultsError(f"{measurements}: holds no result files; run `memory-budget measure` first")
    return max(candidates, key=_newest_measurement)


def _newest_measurement(folder: Path) -> str:
    return max(load_file(path).measured_at for path in result_files(folder))


def load_environment(folder: Path) -> list[RowResult]:
    """Every row of one environment; refuses an empty folder and a folder that mixes environments."""
    files = result_files(folder)
    if not files:
        raise ResultsError(f"{folder}: holds no result files")
    results = [load_file(path) for path in files]
    environments = sorted({result.environment.id for result in results})
    if len(environments) > 1:
        raise ResultsError(f"{folder}: mixes environments ({', '.join(environments)}); "
                           "keep one environment per folder")
    if folder.name != environments[0] and folder.parent.name and _looks_like_environment_folder(folder):
        raise ResultsError(f"{folder}: holds results of environment {environments[0]!r}; "
                           "the folder must carry the environment's id")
    models = sorted({(result.model.name, result.model.config_sha256) for result in results
                     if result.row.mode != "baseline"})
    if len(models) > 1:
        raise ResultsError(f"{folder}: mixes models ({', '.join(name for name, _ in models)})")
    return results


def _looks_like_environment_folder(folder: Path) -> bool:
    return folder.name.startswith(("cpu-", "cuda-"))
