"""Shared fixtures: one real measurement of the default matrix on a tiny Llama config, made once per session."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
TINY_MODEL = TESTS / "tiny-llama.json"
# Every test simulates afresh, and nothing is written to the user's cache; the cache's own tests turn it on in a
# temporary folder. Commands run in subprocesses inherit this.
os.environ["MEMORY_BUDGET_CACHE"] = "off"


# The two tiers (README, and the docs' Development page): `nox -s tests` runs the fast one, every test not marked
# slow; `nox -s tests_full` (and CI) runs them all. A test is slow where it measures real worker processes (the measured
# fixtures below), drives a browser, or is marked so by hand (@pytest.mark.slow, or a file's pytestmark): it
# simulates a large config or every architecture, or starts many processes.
SLOW_FIXTURES = ("measured_root", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if any(name in getattr(item, "fixturenames", ()) for name in SLOW_FIXTURES):
            item.add_marker(pytest.mark.slow)


def run_cli(*args: str, cwd: Path | None = None, env: dict | None = None,
            timeout: float = 300) -> subprocess.CompletedProcess:
    """Run `python -m generator ARGS` in a fresh process, as a user would."""
    return subprocess.run([sys.executable, "-m", "generator", *args], capture_output=True, text=True,
                          cwd=cwd, env=env, timeout=timeout, check=False)


@pytest.fixture(scope="session")
def measured_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A measurements folder holding the whole default matrix, measured on the tiny config."""
    root = tmp_path_factory.mktemp("measurements")
    result = run_cli("measure", "--model", str(TINY_MODEL), "--repeats", "1", "--output", str(root))
    assert result.returncode == 0, result.stderr
    return root


@pytest.fixture(scope="session")
def measured_folder(measured_root: Path) -> Path:
    """The one model folder of the one environment under measured_root."""
    (environment,) = [path for path in measured_root.iterdir() if path.is_dir()]
    (folder,) = [path for path in environment.iterdir() if path.is_dir()]
    return folder


@pytest.fixture
def measurements_copy(measured_root: Path, tmp_path: Path) -> Path:
    """A copy of the measured folder that a test may change."""
    copy = tmp_path / "measurements"
    shutil.copytree(measured_root, copy)
    return copy


def grow(document: dict, factor: float = 1.0, add: int = 0) -> None:
    """Move a result file's net peak as a real run would move it: the summary, its spread, the process peak and
    every repeat, so that the file stays plausible (the loader refuses a summary outside its repeats)."""
    result = document["result"]

    def moved(net: int) -> int:
        return int(net * factor) + add

    before = result["net_peak_bytes"]
    for key in ("net_peak_bytes", "net_peak_min_bytes", "net_peak_max_bytes"):
        if result.get(key):
            result[key] = moved(result[key])
    result["peak_rss_bytes"] += result["net_peak_bytes"] - before
    for repeat in document.get("repeats", []):
        if repeat.get("status") == "ok":
            repeat["peak_rss_bytes"] = repeat["baseline_bytes"] + moved(repeat["peak_rss_bytes"]
                                                                        - repeat["baseline_bytes"])
