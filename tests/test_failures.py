"""Nothing lost, nothing hidden: every failure status from a real worker, caps, interrupts and the lock."""

import fcntl
import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import TESTS, TINY_MODEL, run_cli

from generator.store.codec import load_file

pytestmark = pytest.mark.slow  # induces failures in real worker processes

# Large vocabulary and width: AdamW state and activations both big enough that step 2 needs ~200 MiB more
# than step 1, far more than the run-to-run noise of a single allocation.
WIDE_MODEL = TESTS / "wide-tiny-llama.json"


def measure(output: Path, *rows: str, fault: str = "", extra: tuple[str, ...] = (),
            model: Path = TINY_MODEL, repeats: int = 1) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEMORY_BUDGET_FAULT": fault}
    return run_cli("measure", "--model", str(model), "--repeats", str(repeats), "--output", str(output),
                   "--rows", *rows, *extra, env=env)


def row_file(output: Path, row_id: str) -> Path:
    return next(output.glob(f"*/*/{row_id}.toml"))


@pytest.mark.parametrize(("fault", "status", "phase", "detail"), [
    ("raise:backward:train-b2-s256", "error", "backward", "RuntimeError: induced failure in backward"),
    ("kill:step2:train-b2-s256", "killed", "step2", "SIGKILL"),
])
def test_a_failed_row_is_recorded_and_the_matrix_goes_on(tmp_path: Path, fault: str, status: str, phase: str,
                                                         detail: str) -> None:
    result = measure(tmp_path, "train-b1", "train-b2", "train-b4", fault=fault)
    assert result.returncode == 1
    failed = load_file(row_file(tmp_path, "train-b2-s256")).summary
    assert (failed.status, failed.phase) == (status, phase)
    assert detail in failed.detail
    assert failed.net_peak_bytes == 0  # no figure for a failed row; its peaks so far are kept
    assert "load" in failed.phase_peak_bytes
    for row_id in ("train-b1-s256", "train-b4-s256"):
        assert load_file(row_file(tmp_path, row_id)).summary.ok
    assert f"train-b2-s256: {status} in {phase}" in result.stderr
    assert "1 failed" in result.stderr


def test_a_row_past_its_timeout_is_stopped(tmp_path: Path) -> None:
    started = time.monotonic()
    result = measure(tmp_path, "train-b1", fault="hang:forward", extra=("--timeout", "4"))
    assert time.monotonic() - started < 60
    assert result.returncode == 1
    summary = load_file(row_file(tmp_path, "train-b1-s256")).summary
    assert (summary.status, summary.phase) == ("timeout", "forward")


def test_a_cap_between_the_step_peaks_lets_step_1_finish_and_kills_step_2(tmp_path: Path) -> None:
    uncapped = measure(tmp_path, "train-b4-s128", model=WIDE_MODEL, repeats=3)  # probe aims at the medians
    assert uncapped.returncode == 0, uncapped.stderr
    step1, step2 = load_file(row_file(tmp_path, "train-b4-s128")).summary.step_peaks()
    assert step2 > step1
    probe = run_cli("probe", "--model", str(WIDE_MODEL), "--row", "train-b4-s128", "--output", str(tmp_path))
    assert probe.returncode == 0, probe.stderr
    capped = load_file(next(tmp_path.glob("*/*/train-b4-s128-cap*.toml")))
    assert step1 < capped.row.memory_limit_bytes < step2
    seen = (f"cap {capped.row.memory_limit_bytes >> 20} MiB between {step1 >> 20} and {step2 >> 20} MiB; "
            f"capped run's phases {dict((k, v >> 20) for k, v in capped.summary.phase_peak_bytes.items())}")
    assert (capped.summary.status, capped.summary.phase) == ("oom", "step2"), seen
    # How far it got: its own step-1 phases are recorded, and it died short of the uncapped step-2 peak.
    # (Not "below the cap": RLIMIT_DATA bounds data, and library pages faulted in later still add to RSS.)
    assert {"forward", "backward", "optimizer"} <= set(capped.summary.phase_peak_bytes)
    assert 0 < capped.summary.peak_rss_bytes < step2, seen
    assert capped.summary.memory_limit_method in ("RLIMIT_DATA", "cgroup v2 memory.max")
    assert "step 1 completed, then OOM in step2" in probe.stderr


def test_a_cap_below_the_model_fails_while_loading(tmp_path: Path) -> None:
    """A cap 24 MiB above what the imports hold (the baseline row, measured first: bitsandbytes, where installed,
    comes in with peft and adds about 40 MiB) lets the imports finish, and is far below the model's 67 MiB of
    fp32 weights: the row dies while loading."""
    assert measure(tmp_path, "baseline", model=WIDE_MODEL).returncode == 0
    imports = load_file(row_file(tmp_path, "baseline")).summary.baseline_bytes
    cap = (imports >> 20) + 24
    result = measure(tmp_path, "train-b4-s128", model=WIDE_MODEL, extra=("--memory-limit", f"{cap}MiB"))
    assert result.returncode == 1
    summary = load_file(row_file(tmp_path, f"train-b4-s128-cap{cap}MiB")).summary
    assert summary.status == "oom" and summary.phase in ("load", "forward"), (cap, summary.phase)


def _processes_with(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and marker.encode() in (proc / "environ").read_bytes():
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.parametrize("inherited", ["default", "ignored"])
def test_ctrl_c_stops_the_matrix_cleanly(tmp_path: Path, inherited: str) -> None:
    """Deterministic: SIGINT is sent once the hanging worker has said it hangs (a file the fault hook makes),
    not after a guessed delay. 'ignored' starts the command as a non-interactive shell starts a background job,
    with SIGINT ignored: the command must restore it, or Ctrl-C is lost (the CI failure this test reproduces)."""
    marker, ready = f"memory-budget-test-{uuid.uuid4()}", tmp_path / "hanging"
    env = {**os.environ, "MEMORY_BUDGET_FAULT": "hang:forward:train-b2-s256", "TEST_MARKER": marker,
           "MEMORY_BUDGET_FAULT_READY": str(ready)}
    output = tmp_path / "measurements"
    process = subprocess.Popen(
        [sys.executable, "-m", "generator", "measure", "--model", str(TINY_MODEL), "--repeats", "1",
         "--output", str(output), "--rows", "train-b1", "train-b2", "train-b4"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True,
        preexec_fn=_ignore_sigint if inherited == "ignored" else None)
    deadline = time.monotonic() + 240
    while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ready.exists(), process.communicate(timeout=60)[1]
    os.killpg(process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr
    folder = next(next(output.iterdir()).iterdir())  # measurements/<environment>/<model>/
    assert load_file(folder / "train-b1-s256.toml").summary.ok
    assert not (folder / "train-b2-s256.toml").exists() and not (folder / "train-b4-s256.toml").exists()
    assert not [p.name for p in folder.iterdir() if p.name.endswith(".tmp")]
    assert _processes_with(marker) == []  # the worker and its server are gone when the command returns


def test_two_runs_cannot_write_the_same_folder(measurements_copy: Path) -> None:
    folder = next(next(p for p in measurements_copy.iterdir() if p.is_dir()).iterdir())
    before = {p.name: p.read_bytes() for p in folder.glob("*.toml")}
    with open(folder / ".lock", "a+") as held:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.write("12345")
        held.flush()
        result = measure(measurements_copy, "train-b1", extra=("--force",))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"memory-budget: error: another measure run (pid 12345) is writing to {folder}; wait for it or stop it"]
    assert {p.name: p.read_bytes() for p in folder.glob("*.toml")} == before
