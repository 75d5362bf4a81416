"""measure through submitit: local jobs behave as the default rounds do, a job that dies is a failed row, a
rerun completes the matrix, and the Slurm array's sbatch script is what a cluster would be sent."""

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from conftest import TINY_MODEL, run_cli

from generator.store.codec import load_file

pytestmark = pytest.mark.slow  # runs real workers through the cluster path

pytest.importorskip("submitit")


def _rows(root: Path) -> dict[str, object]:
    return {path.name: load_file(path) for path in root.glob("*/*/[!_]*.toml")}


def test_the_local_executor_writes_what_the_default_rounds_write(measured_root: Path, tmp_path: Path) -> None:
    local = tmp_path / "local"
    result = run_cli("measure", "--model", str(TINY_MODEL), "--repeats", "1", "--output", str(local),
                     "--executor", "local", timeout=600)
    assert result.returncode == 0, result.stderr
    mine, theirs = _rows(local), _rows(measured_root)
    assert sorted(mine) == sorted(theirs)
    assert [p.relative_to(local).parts[:2] for p in sorted(local.glob("*/*/[!_]*.toml"))] == [
        p.relative_to(measured_root).parts[:2] for p in sorted(measured_root.glob("*/*/[!_]*.toml"))]
    for name, result_file in mine.items():
        other = theirs[name]
        assert result_file.summary.status == other.summary.status == "ok"  # type: ignore[attr-defined]
        assert set(result_file.summary.phase_peak_bytes) == set(other.summary.phase_peak_bytes)  # type: ignore[attr-defined]
    environment = next(p for p in local.iterdir() if p.is_dir() and not p.name.startswith("."))
    diff = run_cli("diff", str(next(p for p in measured_root.iterdir() if p.is_dir())), str(environment),
                   "--format", "json")
    assert diff.returncode in (0, 1), diff.stderr
    assert "not comparable" not in diff.stdout
    pages = {}
    for name, root in (("local", local), ("rounds", measured_root)):
        site = run_cli("build", "--measurements", str(root), "--output", str(tmp_path / f"site-{name}"))
        assert site.returncode == 0, site.stderr
        pages[name] = {path.name: [line for line in path.read_text().splitlines() if line.startswith("#")]
                       for path in (tmp_path / f"site-{name}").glob("*.md")}
    assert pages["local"] == pages["rounds"]  # the same pages, with the same sections


def _job_processes(marker: str) -> list[int]:
    found = []
    for proc in Path("/proc").iterdir():
        try:
            if (proc.name.isdigit() and marker.encode() in (proc / "environ").read_bytes()
                    and b"submitit" in (proc / "cmdline").read_bytes()):
                found.append(int(proc.name))
        except OSError:
            continue
    return found


def test_a_job_killed_mid_step_is_a_failed_row_and_a_rerun_completes(tmp_path: Path) -> None:
    marker, ready = f"memory-budget-test-{uuid.uuid4()}", tmp_path / "hanging"
    output = tmp_path / "measurements"
    env = {**os.environ, "MEMORY_BUDGET_FAULT": "hang:forward:train-b2-s256", "TEST_MARKER": marker,
           "MEMORY_BUDGET_FAULT_READY": str(ready)}
    command = [sys.executable, "-m", "generator", "measure", "--model", str(TINY_MODEL), "--repeats", "1",
               "--output", str(output), "--rows", "train-b1", "train-b2", "--executor", "local"]
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 240
    while not ready.exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ready.exists(), process.communicate(timeout=60)[1]
    for pid in _job_processes(marker):  # what Slurm's OOM killer or a lost node does to a job
        os.kill(pid, signal.SIGKILL)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 1, stderr
    failed = load_file(next(output.glob("*/*/train-b2-s256.toml"))).summary
    assert failed.status == "killed" and failed.phase == "forward" and "the job died" in failed.detail
    assert load_file(next(output.glob("*/*/train-b1-s256.toml"))).summary.ok
    rerun = run_cli(*command[3:], env={**os.environ, "MEMORY_BUDGET_FAULT": ""}, timeout=300)
    assert rerun.returncode == 0, rerun.stderr
    assert "submitting 1 job(s)" in rerun.stderr  # only the row that was missing
    assert load_file(next(output.glob("*/*/train-b2-s256.toml"))).summary.ok


def test_the_debug_executor_runs_jobs_in_process(tmp_path: Path) -> None:
    result = run_cli("measure", "--model", str(TINY_MODEL), "--repeats", "2", "--output", str(tmp_path),
                     "--rows", "infer-b1", "--executor", "debug")
    assert result.returncode == 0, result.stderr
    row = load_file(next(tmp_path.glob("*/*/infer-b1-s256.toml")))
    assert row.summary.ok and len(row.repeats) == 2


def test_the_sbatch_script_of_the_default_matrix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No cluster here: a stand-in sbatch keeps the script submitit sends and answers as Slurm does."""
    from generator.matrix import default_matrix
    from generator.measure.cluster import ClusterOptions, make_executor, submit
    from generator.measure.runner import Job
    from generator.model_source import resolve_model

    bin_folder, kept = tmp_path / "bin", tmp_path / "sent.sh"
    bin_folder.mkdir()
    (bin_folder / "sbatch").write_text(f"#!/bin/sh\ncp \"$1\" {kept}\necho 'Submitted batch job 4242'\n")
    (bin_folder / "sbatch").chmod(0o755)
    (bin_folder / "srun").write_text("#!/bin/sh\nexit 0\n")  # submitit looks for it before it submits
    (bin_folder / "srun").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_folder}:{os.environ['PATH']}")
    options = ClusterOptions(executor="slurm", partition="gpu", time_minutes=30, memory="64G", gpus=1,
                             array_parallelism=4, account="memory-team")
    executor = make_executor(options, tmp_path / "jobs")
    source = resolve_model(None)
    specs = [(Job(row=row, model=source), 0, number, tmp_path / f"{row.id}-{number}")
             for number in (1, 2, 3) for row in default_matrix()]
    submitted = submit(executor, specs)
    script = kept.read_text()
    assert len(submitted) == 33 and {s.handle.job_id.split("_")[0] for s in submitted} == {"4242"}
    for line in ("#SBATCH --array=0-32%4", "#SBATCH --partition=gpu", "#SBATCH --time=30", "#SBATCH --mem=64G",
                 "#SBATCH --account=memory-team", "#SBATCH --gpus-per-node=1", "#SBATCH --job-name=memory-budget"):
        assert line in script, script


def test_slurm_options_come_from_a_file_beside_the_measurements(tmp_path: Path) -> None:
    from generator.measure.cluster import load_options

    (tmp_path / "_slurm.toml").write_text('[slurm]\npartition = "cpu"\ntime_minutes = 90\n')
    options = load_options(tmp_path, {"executor": "slurm", "partition": None, "time_minutes": 20})
    assert (options.partition, options.time_minutes) == ("cpu", 20)
    (tmp_path / "_slurm.toml").write_text('[slurm]\npartitoin = "cpu"\n')
    with pytest.raises(ValueError, match="unknown keys partitoin"):
        load_options(tmp_path, {})


def test_the_merger_keeps_two_node_types_apart(tmp_path: Path) -> None:
    """Repeats of one row from two kinds of node are two rows, each in its environment's folder, never one row
    with the repeats of both machines mixed into one median."""
    from dataclasses import replace

    from test_mutation_figures import ENV

    from generator.matrix import parse_row
    from generator.measure.cluster import JobOutcome, Submission
    from generator.measure.cluster_run import _Merger
    from generator.measure.matrix_run import MeasureRequest
    from generator.model_source import resolve_model
    from generator.store.records import Repeat

    class _Display:
        def row_finished(self, *_: object) -> None:
            pass

    row = parse_row("infer-b1-s256")
    request = MeasureRequest(rows=(row,), model=resolve_model(str(TINY_MODEL)), output=tmp_path / "m")
    merge = _Merger(request, _Display(), tmp_path / "jobs")  # type: ignore[arg-type]
    for environment, peak in ((ENV, 300_000_000), (replace(ENV, id="cpu-other-node", cpu="Xeon"), 500_000_000)):
        for _ in range(2):
            repeat = Repeat(status="ok", baseline_bytes=100_000_000, peak_rss_bytes=peak, parameters=1)
            merge(Submission(row, 1, tmp_path, None), JobOutcome(environment, repeat, ""))
    loaded = sorted((load_file(path) for path in (tmp_path / "m").glob("*/*/infer-b1-s256.toml")),
                    key=lambda result: result.environment.id)
    assert [(r.environment.id, len(r.repeats), r.summary.net_peak_bytes) for r in loaded] == [
        ("cpu-other-node", 2, 400_000_000), ("cpu-x", 2, 200_000_000)]
