"""Fast, exact tests of the cluster path's orchestration (generator/measure/cluster_run.py): which rows it
submits, in what order and with which limits, what it skips, how it reports progress, and where the repeats land.
submitit, the worker and the estimate are stand-ins, so a run takes milliseconds and `nox -s mutation` can run
these against every bug it plants. tests/test_cluster.py runs the real executors."""

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import TINY_MODEL
from test_mutation_figures import ENV

from generator.matrix import parse_row
from generator.measure import cluster_run
from generator.measure.cluster import ClusterOptions, JobOutcome
from generator.measure.matrix_run import MeasureRequest
from generator.model_source import resolve_model
from generator.store import layout
from generator.store.codec import load_file
from generator.store.records import Repeat

OTHER = replace(ENV, id="cpu-other-node", cpu="Xeon")
ROWS = (parse_row("infer-b1-s256"), parse_row("train-b1-s256-cap512MiB"))


class Display:
    """MatrixDisplay's stand-in: every call, in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def __getattr__(self, name: str):
        return lambda *args: self.calls.append((name, *args))


class Cluster:
    """submitit and the worker, stood in: each job's repeat comes from `peaks`, on the environment `where`."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, where=ENV, interrupt_after: int = 0,
                 fail_training_again: bool = False, device: str = "cpu") -> None:
        self.fail_training_again, self.device = fail_training_again, device
        self.submitted: list[list[tuple]] = []
        self.executors: list[tuple] = []
        self.where, self.interrupt_after = where, interrupt_after
        monkeypatch.setattr(cluster_run, "collect_environment", lambda device: ENV if device == self.device else None)
        monkeypatch.setattr(cluster_run, "make_executor", lambda options, jobs: self.executors.append(
            (options.executor, jobs)) or "executor")
        monkeypatch.setattr(cluster_run, "submit", lambda executor, specs: self.submitted.append(specs) or specs
                            if executor == "executor" else pytest.fail("submitted to no executor"))
        monkeypatch.setattr(cluster_run, "follow", self.follow)
        self.estimated: list[tuple] = []
        monkeypatch.setattr(cluster_run, "estimate", lambda rows, model, output, here, timeout: self.estimated.append(
            (model.name, output.name, timeout)) or SimpleNamespace(
            seconds={row: 10.0 * (i + 1) for i, row in enumerate(rows)}, server_seconds=2.0) if here is ENV
            else pytest.fail("estimated for no machine"))
        self.recorded: list[float] = []
        record = cluster_run.record_run
        monkeypatch.setattr(cluster_run, "record_run", lambda folder, report, seconds, started_at: self.recorded.append(
            seconds) or record(folder, report, seconds, started_at))

    def follow(self, specs: list[tuple], on_done, environment) -> None:
        assert environment is ENV  # where a job that died is said to have run
        for job, cap, number, folder in specs:
            assert job.model.name == "tiny-llama" and job.device == self.device, (job.model, job.device)
            if self.interrupt_after and sum(map(len, self.submitted)) > self.interrupt_after:
                raise KeyboardInterrupt
            failed = self.fail_training_again and job.row.mode == "train" and number == 2
            repeat = Repeat(status="oom", phase="backward", detail="cap reached", baseline_bytes=100_000_000,
                            peak_rss_bytes=200_000_000, wall_seconds=3.0) if failed else Repeat(
                status="ok", baseline_bytes=100_000_000, peak_rss_bytes=300_000_000 + number, parameters=1,
                wall_seconds=4.0)
            on_done(SimpleNamespace(row=job.row, round=number, state_folder=folder), JobOutcome(
                self.where, repeat, "cap" if cap else ""))


def _request(tmp_path: Path, **given) -> MeasureRequest:
    return MeasureRequest(rows=ROWS, model=resolve_model(str(TINY_MODEL)), output=tmp_path / "m", repeats=2,
                          **given)


def test_one_job_at_a_time_round_by_round(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cluster, display = Cluster(monkeypatch, fail_training_again=True), Display()
    request = _request(tmp_path, timeout_seconds=7000.0)
    report = cluster_run.run_cluster_matrix(request, display, ClusterOptions(executor="local",  # type: ignore[arg-type]
                                                                            time_minutes=100))
    jobs = tmp_path / "m" / ".jobs" / layout.model_folder_name(request.model.name)
    assert cluster.executors == [("local", jobs)]
    assert [[(job.row.id, job.timeout_seconds, cap, number) for job, cap, number, _ in specs]
            for specs in cluster.submitted] == [
        [("infer-b1-s256", 5700.0, 0, 1)], [("train-b1-s256-cap512MiB", 5700.0, 512 * 2**20, 1)],
        [("infer-b1-s256", 5700.0, 0, 2)], [("train-b1-s256-cap512MiB", 5700.0, 512 * 2**20, 2)]]
    folders = [folder for specs in cluster.submitted for *_, folder in specs]
    assert all(folder.parent == jobs and folder.name.startswith(f"{job.row.id}-round{number}-")
               for specs in cluster.submitted for job, _, number, folder in specs) and len(set(folders)) == 4
    assert display.calls[:2] == [("log", f"submitting 4 job(s) of {request.model.name} to the local executor"),
                                 ("start", 2 * (12.0 + 22.0), 4)]
    started = [call[1:] for call in display.calls if call[0] == "row_started"]
    assert started == [("infer-b1-s256", 12.0, 1), ("train-b1-s256-cap512MiB", 22.0, 1),
                       ("infer-b1-s256", 12.0, 2), ("train-b1-s256-cap512MiB", 22.0, 2)]
    finished = [call[1:] for call in display.calls if call[0] == "row_finished"]
    assert finished[0] == ("infer-b1-s256", "ok", 200_000_001, 4.0, "")
    assert finished[3] == ("train-b1-s256-cap512MiB", "oom", 100_000_000, 3.0, "in backward: cap reached")
    assert cluster.estimated == [("tiny-llama", "m", 7000.0)]
    assert len(cluster.recorded) == 1 and 0 <= cluster.recorded[0] < 60
    folder = report.folder
    assert folder == tmp_path / "m" / ENV.id / layout.model_folder_name(request.model.name)
    assert sorted(r.row.id for r in report.written) == ["infer-b1-s256", "train-b1-s256-cap512MiB"]
    assert report.skipped == [] and not report.interrupted
    saved = load_file(folder / "train-b1-s256-cap512MiB.toml")
    assert [r.peak_rss_bytes for r in saved.repeats] == [300_000_001, 200_000_000]
    assert saved.summary.memory_limit_method == "cap"
    assert (folder / "_runs.toml").is_file() and layout.remembered_environments(jobs) == [ENV.id]


def test_a_rerun_skips_finished_rows_and_force_does_not(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    Cluster(monkeypatch)
    options = ClusterOptions(executor="local")
    cluster_run.run_cluster_matrix(_request(tmp_path), Display(), options)  # type: ignore[arg-type]
    cluster, display = Cluster(monkeypatch), Display()
    report = cluster_run.run_cluster_matrix(_request(tmp_path), display, options)  # type: ignore[arg-type]
    assert report.skipped == ["infer-b1-s256", "train-b1-s256-cap512MiB"] and report.written == []
    assert cluster.submitted == [] and display.calls == []
    report = cluster_run.run_cluster_matrix(_request(tmp_path, force=True), Display(), options)  # type: ignore[arg-type]
    assert report.skipped == [] and len(cluster.submitted) == 4
    report = cluster_run.run_cluster_matrix(replace(_request(tmp_path), repeats=3), Display(), options)  # type: ignore[arg-type]
    assert report.skipped == [] and len(cluster.submitted) == 4 + 6  # a row with fewer repeats than asked


def test_slurm_submits_one_array_and_looks_in_every_node_types_folder(monkeypatch: pytest.MonkeyPatch,
                                                                     tmp_path: Path) -> None:
    Cluster(monkeypatch, where=OTHER)
    options = ClusterOptions(executor="slurm")
    display = Display()
    report = cluster_run.run_cluster_matrix(_request(tmp_path), display, options)  # type: ignore[arg-type]
    assert display.calls[1] == ("start", 0.0, 4)
    assert not [call for call in display.calls if call[0] == "row_started"]
    assert report.folder.parent.name == ENV.id  # where this machine's rows would go
    assert {r.environment.id for r in report.written} == {OTHER.id}
    assert (tmp_path / "m" / OTHER.id).is_dir() and not (tmp_path / "m" / ENV.id).exists()
    assert (tmp_path / "m" / OTHER.id / report.folder.name / "_runs.toml").is_file()
    cluster = Cluster(monkeypatch, where=OTHER)
    again = cluster_run.run_cluster_matrix(_request(tmp_path), Display(), options)  # type: ignore[arg-type]
    assert again.skipped == [row.id for row in ROWS] and cluster.submitted == []
    cluster = Cluster(monkeypatch, where=OTHER)  # the local executor looks in this machine's folder only
    local = cluster_run.run_cluster_matrix(_request(tmp_path), Display(), ClusterOptions())  # type: ignore[arg-type]
    assert local.skipped == [] and len(cluster.submitted) == 4
    assert [len(specs) for specs in Cluster(monkeypatch).submitted] == []


def test_an_interrupted_run_keeps_what_finished(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    Cluster(monkeypatch, interrupt_after=1)
    report = cluster_run.run_cluster_matrix(_request(tmp_path), Display(), ClusterOptions())  # type: ignore[arg-type]
    assert report.interrupted and [r.row.id for r in report.written] == ["infer-b1-s256"]
    assert (report.folder / "_runs.toml").is_file()
    Cluster(monkeypatch, interrupt_after=-1)
    monkeypatch.setattr(cluster_run, "follow", lambda *args: (_ for _ in ()).throw(KeyboardInterrupt))
    report = cluster_run.run_cluster_matrix(_request(tmp_path / "b"), Display(), ClusterOptions())  # type: ignore[arg-type]
    assert report.interrupted and report.written == [] and not (report.folder / "_runs.toml").exists()


def test_the_worker_protocol_reads_what_a_worker_said_and_nothing_else(tmp_path: Path) -> None:
    from generator.measure.protocol import STATE_FILE, WorkerState, read_result, read_state, write_result, write_state

    assert read_state(tmp_path) == WorkerState() and read_state(tmp_path).phase == "imports"
    assert read_result(tmp_path) is None
    write_state(tmp_path, WorkerState("backward", 5.0, 100, {"load": 300, "forward": 700}))
    said = read_state(tmp_path)
    assert said == WorkerState("backward", 5.0, 100, {"load": 300, "forward": 700})
    assert said.failed("killed", "SIGKILL", 2.5) == Repeat(
        status="killed", phase="backward", detail="SIGKILL", wall_seconds=2.5, baseline_bytes=100,
        phase_peak_bytes={"load": 300, "forward": 700}, peak_rss_bytes=700)
    assert WorkerState(baseline_bytes=100).failed("error", "x").peak_rss_bytes == 100
    (tmp_path / STATE_FILE).write_text('{"phase": "forw', encoding="utf-8")  # never written half, but read safely
    assert read_state(tmp_path) == WorkerState()
    write_result(tmp_path, {"status": "ok"})
    assert read_result(tmp_path) == {"status": "ok"}


def test_a_gpu_request_runs_its_jobs_on_the_gpu(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    cluster = Cluster(monkeypatch, device="cuda")
    report = cluster_run.run_cluster_matrix(_request(tmp_path, device="cuda"), Display(), ClusterOptions())  # type: ignore[arg-type]
    assert len(cluster.submitted) == 4 and len(report.written) == 2
