"""The measuring worker: one row, one fresh process, two full steps.

The runner starts it as a child forked from a server that has already imported torch, transformers, peft
and the model's code (``forkserver``), so a row pays for building its model, not for imports. A forked child
is a new process with its own peak: the kernel starts its high-water mark at the resident memory it
inherited, which is the imports baseline every row subtracts.

The child rewrites its state file as each phase begins (so the parent can show progress, and knows the phase
if the child dies) and hands its figures back in its result file (generator/measure/protocol.py). Its stdout and
stderr go to a log file; nothing is parsed from them.
"""

import os
import signal
import sys
import time
from pathlib import Path

from generator.escaping import one_line_error
from generator.matrix import Mode
from generator.measure.limits import MemoryLimit
from generator.measure.peak import PeakMeter, status_bytes
from generator.measure.protocol import WorkerState, write_result, write_state
from generator.store.records import declared

# Test hook: MEMORY_BUDGET_FAULT="raise:backward", "kill:step2" or "hang:forward" makes the worker fail at
# the start of that phase, so the tests can check each failure status with a real worker. A third part names
# the one row it applies to: "hang:forward:train-b8-s256". A hanging worker first creates the file that
# MEMORY_BUDGET_FAULT_READY names, if set, so a test knows without guessing that it is hanging.
FAULT_VARIABLE = "MEMORY_BUDGET_FAULT"
FAULT_READY_VARIABLE = "MEMORY_BUDGET_FAULT_READY"
# Test hook: MEMORY_BUDGET_EXTRA="0.02" makes the worker hold, from the start of step 2 to its end, an extra
# allocation of that share of the net peak its step 1 reached: a known change, to test what `diff` can see.
EXTRA_VARIABLE = "MEMORY_BUDGET_EXTRA"


class Worker:
    """Runs the phases of one row and keeps its figures."""

    def __init__(self, job: dict, folder: Path) -> None:
        self.job = job
        self.folder = folder  # where the state and result files go (generator/measure/protocol.py)
        self.meter = PeakMeter()
        self.phase = "imports"
        self.fault = os.environ.get(FAULT_VARIABLE, "")
        self.extra = float(os.environ.get(EXTRA_VARIABLE, "0") or 0)
        self.held: bytearray | None = None
        self.figures: dict = {**{spec.name: {} for spec in declared() if spec.default_factory is dict},
                              "step_seconds": [], "peak_method": self.meter.method}

    def enter(self, phase: str) -> None:
        """Record the peak of the phase that ended, start a new one, and tell the parent."""
        self._close_phase()
        self.phase = phase
        self.meter.reset()
        write_state(self.folder, WorkerState(  # what the parent keeps if this process is killed
            phase=phase, since=time.time(), baseline_bytes=self.figures.get("baseline_bytes", 0),
            phase_peak_bytes=self.figures["phase_peak_bytes"]))
        self._maybe_fault(phase)
        if phase == "step2" and self.extra > 0:
            self._hold_extra()

    def _hold_extra(self) -> None:
        """The sensitivity hook: a share of step 1's net peak, written so that every page is resident."""
        step1 = max(self.figures["phase_peak_bytes"].values(), default=0) - self.figures.get("baseline_bytes", 0)
        self.held = bytearray(b"\x01") * max(round(step1 * self.extra), 0)

    def _close_phase(self) -> None:
        if self.phase == "imports":
            self.figures["baseline_bytes"] = self.meter.peak()
        elif self.meter.per_phase:
            self.figures["phase_peak_bytes"][self.phase] = self.meter.peak()
            for key, field in (("phase_rss_anon_bytes", "RssAnon"), ("phase_rss_file_bytes", "RssFile"),
                               ("phase_swap_bytes", "VmSwap")):
                resident = status_bytes(field)  # heap and tensors, against library pages
                if resident is not None:
                    self.figures[key][self.phase] = resident

    def _maybe_fault(self, phase: str) -> None:
        action, where, row_id = [*self.fault.split(":"), "", "", ""][:3]
        if where != phase or row_id not in ("", self.job["row_id"]):
            return
        if action == "raise":
            raise RuntimeError(f"induced failure in {phase} ({FAULT_VARIABLE})")
        if action == "kill":
            os.kill(os.getpid(), 9)
        if action == "hang":
            ready = os.environ.get(FAULT_READY_VARIABLE)
            if ready:
                Path(ready).touch()
            time.sleep(3600)

    def finish(self) -> dict:
        """Close the last phase and return the figures so far: all of them for a finished row, the peaks
        reached before the failure for a failed one."""
        self._close_phase()
        phase_peaks = self.figures["phase_peak_bytes"].values()
        self.figures["peak_rss_bytes"] = max([self.figures["baseline_bytes"], *phase_peaks, self.meter.peak()])
        return self.figures


def run(worker: Worker) -> None:
    """Import, build, and run the row's steps (generator/steps.py), entering each phase as it begins."""
    import peft  # noqa: F401  (preloaded by the server: part of every row's baseline)
    import torch

    from generator.matrix import RowSpec
    from generator.measure.allocator import check_in_effect
    from generator.model_build import build_model
    from generator.model_source import RANDOM_INIT, ModelSource, import_model_code
    from generator.quantize import parameter_count
    from generator.steps import build_context, prepare, run_steps

    row = RowSpec(**worker.job["row"])
    worker.figures["allocator_settings"] = check_in_effect(row.allocator)
    if worker.job.get("gpu_limit_bytes"):  # a smaller card on this one: the caching allocator's share of it
        total = torch.cuda.get_device_properties(0).total_memory
        torch.cuda.set_per_process_memory_fraction(min(worker.job["gpu_limit_bytes"] / total, 1.0))
    source = ModelSource(**worker.job["model"])
    import_model_code(source)
    worker.figures["startup_seconds"] = time.time() - worker.job["spawned_at"]
    if row.mode == Mode.BASELINE:
        return
    worker.enter("load")
    started = time.perf_counter()
    torch.manual_seed(0)
    with build_context(row, random_init=source.kind == RANDOM_INIT):
        model = build_model(source, getattr(torch, row.dtype))
    prepared = prepare(model, row, worker.job["device"], tuple(source.lora_targets))
    worker.figures["load_seconds"] = time.perf_counter() - started
    worker.figures["parameters"] = sum(parameter_count(p) for p in prepared.model.parameters())
    worker.figures["trainable_parameters"] = sum(p.numel() for p in prepared.model.parameters() if p.requires_grad)
    worker.figures["lora_targets"] = " ".join(prepared.lora_targets)
    clock = {"started": time.perf_counter()}

    def step_done() -> None:
        worker.figures["step_seconds"].append(time.perf_counter() - clock["started"])
        clock["started"] = time.perf_counter()

    run_steps(row, prepared, worker.enter, step_done)


def failure_status(error: BaseException) -> str:
    """'oom' for an allocation that the memory cap or the machine refused, else 'error'."""
    text = str(error)
    out_of_memory = isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"
    return "oom" if out_of_memory or "can't allocate memory" in text or "out of memory" in text else "error"


def cuda_figures() -> dict:
    """The CUDA caching allocator's peaks, for GPU rows."""
    import torch

    return {"cuda_max_allocated_bytes": torch.cuda.max_memory_allocated(),
            "cuda_max_reserved_bytes": torch.cuda.max_memory_reserved()}


def child_main(job: dict, paths: dict[str, str], limit: MemoryLimit | None) -> int:
    """Entry point of the forked child: log to a file, apply the cap, run, and leave the result file.
    Returns the exit status: 0 when the row finished, 1 when it failed."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends this process
    log = os.open(paths["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    if limit is not None:
        limit.apply_in_child()
    worker = Worker(job, Path(paths["state"]).parent)
    try:
        run(worker)
        figures = worker.finish()
        if job["device"] == "cuda":
            figures.update(cuda_figures())
        figures.update(status="ok", phase="", detail="")
    except Exception as error:  # the row failed: report it, the parent carries on
        figures = {**worker.finish(), "status": failure_status(error), "phase": worker.phase,
                   "detail": one_line_error(error)}  # finish() keeps the peaks reached before the failure
        print(f"row failed in {worker.phase}: {figures['detail']}", file=sys.stderr, flush=True)
    write_result(worker.folder, figures)
    return 0 if figures["status"] == "ok" else 1
