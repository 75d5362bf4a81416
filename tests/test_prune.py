"""`prune`: an environment is retired only where a newer one of its release holds every row it holds, and never
the last of a release, one holding the fit page's curves, or one holding a file this tool does not write."""

import shutil
from pathlib import Path

from conftest import run_cli

MEASUREMENTS = Path(__file__).resolve().parent.parent / "measurements"
RELEASE = "cpu-torch2.13.0_cpu-transformers5.24.0-peft0.21.2-py3.11-"
OLDER, NEWER = RELEASE + "09dec3", RELEASE + "a1b2c3"  # a committed environment, and its rows re-measured later
OTHER_RELEASE = "cpu-torch2.13.0_cpu-transformers4.57.6-peft0.21.2-py3.11-09dec3"  # the older one's machine
MODEL = "SmolLM2-135M-Instruct"


def _remeasured(source: Path, target: Path) -> None:
    """The source environment's rows as if measured again later on another machine of the same release."""
    for path in source.rglob("*.toml"):
        text = path.read_text().replace(OLDER, NEWER).replace('cpu = "AMD EPYC"', 'cpu = "AMD EPYC 2"')
        text = "\n".join('measured_at = "2026-12-30T00:00:00Z"' if line.startswith("measured_at") else line
                         for line in text.splitlines()) + "\n"
        (target / path.relative_to(source)).parent.mkdir(parents=True, exist_ok=True)
        (target / path.relative_to(source)).write_text(text)


def _root(tmp_path: Path, *environments: str, covered: bool = True) -> Path:
    """A measurements folder holding copies of committed environments and NEWER, the older one re-measured;
    without ``covered`` the older one keeps a row the newer one lacks."""
    root = tmp_path / "measurements"
    for name in environments:
        shutil.copytree(MEASUREMENTS / name, root / name)
    _remeasured(MEASUREMENTS / OLDER, root / NEWER)
    if not covered:
        (root / NEWER / MODEL / "train-b8-s256-lora8.toml").unlink()
    return root


def _verdicts(root: Path) -> dict[str, tuple[bool, str]]:
    from generator.store.prune import prune_plan

    return {d.folder.name: (d.retired, d.reason) for d in prune_plan(root)}


def test_an_environment_a_newer_one_of_its_release_covers_is_retired_and_deleted(tmp_path: Path) -> None:
    root = _root(tmp_path, OLDER)
    verdicts = _verdicts(root)
    assert verdicts[OLDER] == (True, f"superseded by {NEWER}, which holds every row it holds")
    assert verdicts[NEWER] == (False, "the newest environment of its release")
    listed = run_cli("prune", "--measurements", str(root))
    assert listed.returncode == 0 and f"would remove {OLDER}" in listed.stdout and (root / OLDER).is_dir()
    deleted = run_cli("prune", "--delete", "--measurements", str(root))
    assert deleted.returncode == 0 and f"removed {OLDER}" in deleted.stdout
    assert not (root / OLDER).exists() and (root / NEWER).is_dir()
    again = run_cli("prune", "--delete", "--measurements", str(root))  # the last of a release stays
    assert again.returncode == 0 and (root / NEWER).is_dir() and "removed 0 of 1" in again.stderr


def test_what_would_be_lost_keeps_an_environment(tmp_path: Path) -> None:
    assert _verdicts(_root(tmp_path / "rows", OLDER, covered=False))[OLDER][0] is False  # rows of its own
    curves = _root(tmp_path / "curves", OLDER)
    shutil.copy(next(MEASUREMENTS.glob("*/_fit.toml")), curves / OLDER / "_fit.toml")
    assert _verdicts(curves)[OLDER] == (False, "holds the curves the fit page and fit read (_fit.toml or _curves/)")
    foreign = _root(tmp_path / "foreign", OLDER)
    (foreign / OLDER / MODEL / "notes.txt").write_text("mine\n")
    retired, reason = _verdicts(foreign)[OLDER]
    assert not retired and "notes.txt" in reason
    machine = _root(tmp_path / "machine", OLDER, OTHER_RELEASE)  # its machine measured another release
    assert _verdicts(machine)[OLDER] == (False, "holds finished rows no newer environment of its release holds")


def test_a_missing_measurements_folder_is_one_line_and_exit_2(tmp_path: Path) -> None:
    result = run_cli("prune", "--measurements", str(tmp_path / "nowhere"))
    assert result.returncode == 2 and len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
