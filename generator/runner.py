"""Run one repeat of one row in a fresh worker process and turn what it left behind into a Repeat.

The worker's result comes back through a file; its stdout and stderr go to a log. The runner enforces the
timeout, applies a memory cap, and maps a worker that died into a status: oom, killed (with the signal),
timeout or error, with the phase that was running. Ctrl-C (KeyboardInterrupt) ends the worker first."""

import json
import multiprocessing
import signal
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from multiprocessing import forkserver
from pathlib import Path

from generator.limits import MemoryLimit, memory_limit
from generator.matrix import RowSpec
from generator.model_source import ModelSource
from generator.results import Repeat
from generator.worker import child_main

POLL_SECONDS = 0.2
DEFAULT_TIMEOUT_SECONDS = 3600.0  # the slowest default row (16-bit training on a CPU without bf16) takes ~16 min


@dataclass(frozen=True)
class Job:
    """What one worker process measures and under which constraints."""

    row: RowSpec
    model: ModelSource
    device: str = "cpu"
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS


def job_payload(job: Job) -> dict:
    """The JSON the worker reads."""
    return {"row": asdict(job.row), "row_id": job.row.id, "model": asdict(job.model), "device": job.device,
            "spawned_at": time.time()}


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _last_log_line(log_path: Path) -> str:
    try:
        lines = [line.strip() for line in log_path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    return lines[-1] if lines else ""


class WorkerServer:
    """The forkserver every row's process is forked from, with torch, transformers and peft imported.

    Starting it costs the imports once per repeat round (recorded as `server_start_seconds`); each row then
    starts in a fraction of a second."""

    def __init__(self, model: ModelSource) -> None:
        self.context = multiprocessing.get_context("forkserver")
        self.context.set_forkserver_preload(["torch", "transformers", "peft", model.code_module,
                                             "generator.worker"])
        started = time.perf_counter()
        forkserver.ensure_running()
        ready_check = self.context.Process(target=_ready, name="memory-budget ready check")
        ready_check.start()  # answered once the server has finished its imports
        ready_check.join()
        self.start_seconds = time.perf_counter() - started

    def stop(self) -> None:
        """End the server, so that the next WorkerServer imports everything afresh in a new process.

        Children forked from one server inherit its heap byte for byte and come out identical; a fresh server
        per repeat round makes the repeats as independent as separate runs. multiprocessing has no public way
        to stop its forkserver; ``_stop`` is the one its own tests use."""
        forkserver._forkserver._stop()  # type: ignore[attr-defined]


def _ready() -> None:
    """A child that does nothing: forking it proves the server is ready."""


class WorkerProcess:
    """One running worker: fork, watch, stop."""

    def __init__(self, job: Job, folder: Path, limit: MemoryLimit | None, server: WorkerServer) -> None:
        self.paths = {name: str(folder / f"{name}.json") for name in ("state", "result")}
        self.paths["log"] = str(folder / "worker.log")
        self.limit = limit
        self.timeout_seconds = job.timeout_seconds
        self.started = time.monotonic()
        self.process = server.context.Process(target=child_main, args=(job_payload(job), self.paths, limit),
                                              name=f"memory-budget {job.row.id}", daemon=True)
        self.process.start()

    @property
    def elapsed(self) -> float:
        """Seconds since the worker was started."""
        return time.monotonic() - self.started

    @property
    def running(self) -> bool:
        """Whether the worker has not exited yet."""
        return self.process.exitcode is None

    def state(self) -> dict:
        """What the worker last said: its phase and the peaks of the phases it finished ({} before it spoke)."""
        return _read_json(Path(self.paths["state"])) or {}

    def phase(self) -> str:
        """The phase the worker said it entered last ('imports' before it said anything)."""
        return self.state().get("phase", "imports")

    def stop(self) -> None:
        """End the worker and wait for it, so it leaves nothing running."""
        if self.process.exitcode is None:
            self.process.kill()
        self.process.join()

    def outcome(self, timed_out: bool) -> Repeat:
        """Turn the exit into a Repeat: the worker's own result if it wrote one, else what the exit says."""
        wall = self.elapsed
        figures = _read_json(Path(self.paths["result"]))
        if figures is not None and not timed_out:
            return Repeat.from_figures(figures, wall_seconds=wall)
        state, code = self.state(), self.process.exitcode
        if timed_out:
            status, detail = "timeout", f"no result after {self.timeout_seconds:g} s"
        elif self.limit is not None and self.limit.oom_killed():
            status, detail = "oom", "killed by the cgroup's OOM killer"
        elif code is not None and code < 0:
            status, detail = "killed", signal.Signals(-code).name
        else:
            status = "error"
            detail = _last_log_line(Path(self.paths["log"])) or f"exit status {code} without a result"
        peaks, baseline = state.get("phase_peak_bytes", {}), state.get("baseline_bytes", 0)
        return Repeat(status=status, phase=state.get("phase", "imports"), detail=detail, wall_seconds=wall,
                      baseline_bytes=baseline, phase_peak_bytes=peaks,  # the phases it finished before dying
                      peak_rss_bytes=max([baseline, *peaks.values()]))


def run_repeat(job: Job, server: WorkerServer, memory_limit_bytes: int = 0,
               on_phase: Callable[[str, float], None] | None = None) -> tuple[Repeat, str]:
    """Run the job once in a new process. Returns the Repeat and how a memory cap was applied ('' if none).

    on_phase(phase, elapsed_seconds) is called about five times a second while the worker runs.
    A KeyboardInterrupt ends the worker before it propagates."""
    limit = memory_limit(memory_limit_bytes, job.row.id) if memory_limit_bytes else None
    try:
        with tempfile.TemporaryDirectory(prefix="memory-budget-") as folder:
            worker = WorkerProcess(job, Path(folder), limit, server)
            timed_out = False
            try:
                while worker.running:
                    if on_phase is not None:
                        on_phase(worker.phase(), worker.elapsed)
                    if worker.elapsed > job.timeout_seconds:
                        timed_out = True
                        break
                    time.sleep(POLL_SECONDS)
            finally:
                worker.stop()
            return worker.outcome(timed_out), limit.method if limit else ""
    finally:
        if limit is not None:
            limit.release()
