"""Run one repeat of one row in a fresh worker process and turn what it left behind into a Repeat.

``WorkerServer`` owns the server every worker of a repeat round is forked from (generator/measure/server.py):
it starts it, sends it jobs, and stops it, with public process APIs only. The worker's result comes back
through a file; its stdout and stderr go to a log. The runner enforces the timeout, applies a memory cap, and
maps a worker that died into a status: oom, killed (with the signal), timeout or error, with the phase that
was running. Ctrl-C (KeyboardInterrupt) ends the worker first."""

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from generator.escaping import last_line
from generator.matrix import DEFAULT_ALLOCATOR, DEFAULT_TIMEOUT_SECONDS, RowSpec
from generator.measure.allocator import allocator_environment
from generator.measure.limits import MemoryLimit, memory_limit
from generator.measure.protocol import LOG_FILE, RESULT_FILE, STATE_FILE, read_result, read_state
from generator.model_source import ModelSource
from generator.store.records import Repeat

POLL_SECONDS = 0.2
STOP_SECONDS = 30.0


class ServerError(RuntimeError):
    """The worker server could not start or stopped answering."""


@dataclass(frozen=True)
class Job:
    """What one worker process measures and under which constraints."""

    row: RowSpec
    model: ModelSource
    device: str = "cpu"
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS


# How a cap is applied to a GPU row: on the caching allocator, as a share of the card, so that a row measured on
# a large card answers whether it fits a smaller one (the process itself is not capped).
GPU_CAP = "torch.cuda.set_per_process_memory_fraction"


def job_payload(job: Job, gpu_limit_bytes: int = 0) -> dict:
    """The JSON the worker reads."""
    return {"row": asdict(job.row), "row_id": job.row.id, "model": asdict(job.model), "device": job.device,
            "spawned_at": time.time(), "gpu_limit_bytes": gpu_limit_bytes}


def preload_modules(model: ModelSource) -> list[str]:
    """What the server imports before it forks anything: everything a row imports, so it is in the baseline."""
    # generator.quantize before peft: it keeps the note bitsandbytes logs on import (peft imports it) off stderr
    return ["torch", "transformers", "generator.quantize", "peft", model.code_module, "generator.measure.worker"]


def _last_log_line(log_path: Path) -> str:
    try:
        return last_line(log_path.read_text(errors="replace"))
    except OSError:
        return ""


class WorkerServer:
    """One repeat round's server. Starting it costs the imports once (recorded as `server_start_seconds`);
    each row then starts in a fraction of a second. Use it as a context manager, or call stop()."""

    def __init__(self, model: ModelSource, allocator: str = DEFAULT_ALLOCATOR) -> None:
        self.log = tempfile.TemporaryFile(prefix="memory-budget-server-")  # noqa: SIM115  (closed by stop())
        started = time.perf_counter()
        self.allocator = allocator
        self.process = subprocess.Popen(
            [sys.executable, "-m", "generator.measure.server", *preload_modules(model)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, start_new_session=True,
            env=allocator_environment(allocator))
        self._buffer = b""
        try:
            self.message(timeout=None)  # {"ready": ...} once the imports are done
        except BaseException:
            self.stop()
            raise
        self.start_seconds = time.perf_counter() - started

    def __enter__(self) -> "WorkerServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def message(self, timeout: float | None) -> dict | None:
        """The server's next message, or None if none came within timeout seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        stdout = self.process.stdout.fileno()  # type: ignore[union-attr]
        while b"\n" not in self._buffer:
            left = None if deadline is None else max(deadline - time.monotonic(), 0.0)
            readable, _, _ = select.select([stdout], [], [], left)
            if not readable:
                return None
            chunk = os.read(stdout, 4096)
            if not chunk:
                raise ServerError(f"the worker server stopped: {self._log_tail()}")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def spawn(self, job: dict, paths: dict[str, str], limit: MemoryLimit | None) -> int:
        """Fork a worker for one job; its pid."""
        limit_payload = {"n_bytes": limit.n_bytes, "method": limit.method,
                         "cgroup": str(limit.cgroup) if limit.cgroup else ""} if limit else None
        request = json.dumps({"job": job, "paths": paths, "limit": limit_payload}) + "\n"
        self.process.stdin.write(request.encode())  # type: ignore[union-attr]
        self.process.stdin.flush()  # type: ignore[union-attr]
        answer = self.message(timeout=None)
        return int(answer["pid"])  # type: ignore[index]

    def stop(self) -> None:
        """End the server (closing its stdin ends it and any worker it runs) and wait for it."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=STOP_SECONDS)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()
        self.log.close()

    def _log_tail(self) -> str:
        self.log.seek(0)
        return last_line(self.log.read().decode(errors="replace")) or f"exit status {self.process.poll()}"


class WorkerProcess:
    """One running worker: forked by the server, watched, stopped."""

    def __init__(self, job: Job, folder: Path, limit: MemoryLimit | None, server: WorkerServer,
                 gpu_limit_bytes: int = 0) -> None:
        self.folder = folder
        self.paths = {"state": str(folder / STATE_FILE), "result": str(folder / RESULT_FILE),
                      "log": str(folder / LOG_FILE)}
        self.limit, self.server = limit, server
        self.timeout_seconds = job.timeout_seconds
        self.exitcode: int | None = None
        self.started = time.monotonic()
        self.pid = server.spawn(job_payload(job, gpu_limit_bytes), self.paths, limit)

    @property
    def elapsed(self) -> float:
        """Seconds since the worker was started."""
        return time.monotonic() - self.started

    def wait(self, timeout: float | None) -> bool:
        """Wait up to timeout seconds for the worker to end; whether it has."""
        if self.exitcode is None:
            message = self.server.message(timeout)
            if message is not None:
                self.exitcode = int(message["exit"])
        return self.exitcode is not None

    def phase(self) -> str:
        """The phase the worker said it entered last ('imports' before it said anything)."""
        return read_state(self.folder).phase

    def stop(self) -> None:
        """End the worker and wait for it, so it leaves nothing running."""
        if self.exitcode is None:
            os.kill(self.pid, signal.SIGKILL)
            self.wait(timeout=STOP_SECONDS)

    def outcome(self, timed_out: bool) -> Repeat:
        """Turn the exit into a Repeat: the worker's own result if it wrote one, else what the exit says."""
        wall = self.elapsed
        figures = read_result(self.folder)
        if figures is not None and not timed_out:
            return Repeat.from_figures(figures, wall_seconds=wall)
        code = self.exitcode
        if timed_out:
            status, detail = "timeout", f"no result after {self.timeout_seconds:g} s"
        elif self.limit is not None and self.limit.oom_killed():
            status, detail = "oom", "killed by the cgroup's OOM killer"
        elif code is not None and code < 0:
            status, detail = "killed", signal.Signals(-code).name
        else:
            status = "error"
            detail = _last_log_line(Path(self.paths["log"])) or f"exit status {code} without a result"
        return read_state(self.folder).failed(status, detail, wall)  # the phases it finished before dying


def run_repeat(job: Job, server: WorkerServer, memory_limit_bytes: int = 0,
               on_phase: Callable[[str, float], None] | None = None,
               state_folder: Path | None = None) -> tuple[Repeat, str]:
    """Run the job once in a new process. Returns the Repeat and how a memory cap was applied ('' if none).

    on_phase(phase, elapsed_seconds) is called about five times a second while the worker runs. The worker's
    state and result files go to a temporary folder, or to state_folder (a cluster job's shared folder, where
    the submitting machine can read how far a job got if the cluster kills it). A KeyboardInterrupt ends the
    worker before it propagates."""
    on_gpu = job.device == "cuda"
    limit = memory_limit(memory_limit_bytes, job.row.id) if memory_limit_bytes and not on_gpu else None
    try:
        with contextlib.ExitStack() as stack:
            if state_folder is None:
                folder = stack.enter_context(tempfile.TemporaryDirectory(prefix="memory-budget-"))
            else:
                state_folder.mkdir(parents=True, exist_ok=True)
                folder = str(state_folder)
            worker = WorkerProcess(job, Path(folder), limit, server, memory_limit_bytes if on_gpu else 0)
            timed_out = False
            try:
                while not worker.wait(POLL_SECONDS):
                    if on_phase is not None:
                        on_phase(worker.phase(), worker.elapsed)
                    if worker.elapsed > job.timeout_seconds:
                        timed_out = True
                        break
            finally:
                worker.stop()
            method = limit.method if limit else GPU_CAP if on_gpu and memory_limit_bytes else ""
            return worker.outcome(timed_out), method
    finally:
        if limit is not None:
            limit.release()
