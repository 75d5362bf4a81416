"""The measuring worker: one row, one fresh process, two full steps.

The runner starts it as a child forked from a server that has already imported torch, transformers, peft
and the model's code (``forkserver``), so a row pays for building its model, not for imports. A forked child
is a new process with its own peak: the kernel starts its high-water mark at the resident memory it
inherited, which is the imports baseline every row subtracts.

The child rewrites STATE.json as each phase begins (so the parent can show progress, and knows the phase if
the child dies) and hands its figures back in RESULT.json. Its stdout and stderr go to a log file; nothing is
parsed from them.
"""

import json
import os
import signal
import sys
import time
from pathlib import Path

from generator.limits import MemoryLimit
from generator.peak import PeakMeter, status_bytes

# Test hook: MEMORY_BUDGET_FAULT="raise:backward", "kill:step2" or "hang:forward" makes the worker fail at
# the start of that phase, so the tests can check each failure status with a real worker. A third part names
# the one row it applies to: "hang:forward:train-b8-s256".
FAULT_VARIABLE = "MEMORY_BUDGET_FAULT"


def write_json_atomic(path: Path, payload: dict) -> None:
    """Write a small JSON file so that a reader never sees half of it."""
    temporary = path.with_name(path.name + ".tmp")
    temporary.write_text(json.dumps(payload), encoding="utf-8")
    os.replace(temporary, path)


class Worker:
    """Runs the phases of one row and keeps its figures."""

    def __init__(self, job: dict, state_path: Path) -> None:
        self.job = job
        self.row = job["row"]
        self.state_path = state_path
        self.meter = PeakMeter()
        self.phase = "imports"
        self.fault = os.environ.get(FAULT_VARIABLE, "")
        self.figures: dict = {"phase_peak_bytes": {}, "phase_rss_anon_bytes": {}, "phase_rss_file_bytes": {},
                              "step_seconds": [], "peak_method": self.meter.method}

    def enter(self, phase: str) -> None:
        """Record the peak of the phase that ended, start a new one, and tell the parent."""
        self._close_phase()
        self.phase = phase
        self.meter.reset()
        write_json_atomic(self.state_path, {  # what the parent keeps if this process is killed
            "phase": phase, "since": time.time(), "baseline_bytes": self.figures.get("baseline_bytes", 0),
            "phase_peak_bytes": self.figures["phase_peak_bytes"]})
        self._maybe_fault(phase)

    def _close_phase(self) -> None:
        if self.phase == "imports":
            self.figures["baseline_bytes"] = self.meter.peak()
        elif self.meter.per_phase:
            self.figures["phase_peak_bytes"][self.phase] = self.meter.peak()
            for key, field in (("phase_rss_anon_bytes", "RssAnon"), ("phase_rss_file_bytes", "RssFile")):
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
            time.sleep(3600)

    def finish(self) -> dict:
        """Close the last phase and return the figures so far: all of them for a finished row, the peaks
        reached before the failure for a failed one."""
        self._close_phase()
        phase_peaks = self.figures["phase_peak_bytes"].values()
        self.figures["peak_rss_bytes"] = max([self.figures["baseline_bytes"], *phase_peaks, self.meter.peak()])
        return self.figures


def run(worker: Worker) -> None:
    """Import, build, and run the row's steps, entering each phase as it begins."""
    row = worker.row
    import peft  # noqa: F401  (preloaded by the server: part of every row's baseline)
    import torch

    from generator.model_source import ModelSource, import_model_code

    import_model_code(ModelSource(**worker.job["model"]))
    worker.figures["startup_seconds"] = time.time() - worker.job["spawned_at"]
    if row["mode"] == "baseline":
        return
    worker.enter("load")
    started = time.perf_counter()
    model, optimizer, batch = build(worker.job, torch)
    worker.figures["load_seconds"] = time.perf_counter() - started
    worker.figures["parameters"] = sum(p.numel() for p in model.parameters())
    worker.figures["trainable_parameters"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    for step in range(1, row["steps"] + 1):
        started = time.perf_counter()
        if row["mode"] == "train":
            train_step(worker, step, model, optimizer, batch)
        else:
            worker.enter("forward" if step == 1 else f"step{step}")
            with torch.no_grad():
                model(input_ids=batch)
        worker.figures["step_seconds"].append(time.perf_counter() - started)


def build(job: dict, torch):
    """The model in the row's dtype and mode, its optimizer (training rows) and a batch of random tokens."""
    from generator.model_source import ModelSource, build_model

    row = job["row"]
    torch.manual_seed(0)
    dtype = getattr(torch, row["dtype"])
    model = build_model(ModelSource(**job["model"]), dtype).to(job["device"])
    model.config.use_cache = False
    if row["mode"] != "train":
        model.eval()
        optimizer = None
    else:
        if row["gradient_checkpointing"]:
            model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        if row["lora_rank"]:
            model = _with_lora(model, row)
        model.train()
        optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    vocab_size = model.config.vocab_size
    batch = torch.randint(0, vocab_size, (row["batch_size"], row["seq_len"]), device=job["device"])
    return model, optimizer, batch


def _with_lora(model, row: dict):
    import peft

    config = peft.LoraConfig(r=row["lora_rank"], lora_alpha=2 * row["lora_rank"], lora_dropout=0.0,
                             target_modules=list(row["lora_targets"]), task_type="CAUSAL_LM")
    return peft.get_peft_model(model, config)


def train_step(worker: Worker, step: int, model, optimizer, batch) -> None:
    """One full optimizer step. Step 1 is split into phases; later steps are one phase each."""
    worker.enter("forward" if step == 1 else f"step{step}")
    loss = model(input_ids=batch, labels=batch).loss
    if step == 1:
        worker.enter("backward")
    loss.backward()
    if step == 1:
        worker.enter("optimizer")
    optimizer.step()
    optimizer.zero_grad(set_to_none=False)


def failure_status(error: BaseException) -> str:
    """'oom' for an allocation that the memory cap or the machine refused, else 'error'."""
    text = str(error)
    out_of_memory = isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"
    return "oom" if out_of_memory or "can't allocate memory" in text or "out of memory" in text else "error"


def last_line(error: BaseException) -> str:
    """The exception's type and its message's last non-empty line."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return f"{type(error).__name__}: {lines[-1]}" if lines else type(error).__name__


def cuda_figures() -> dict:
    """The CUDA caching allocator's peaks, for GPU rows."""
    import torch

    return {"cuda_max_allocated_bytes": torch.cuda.max_memory_allocated(),
            "cuda_max_reserved_bytes": torch.cuda.max_memory_reserved()}


def child_main(job: dict, paths: dict[str, str], limit: MemoryLimit | None) -> None:
    """Entry point of the forked child: log to a file, apply the cap, run, and leave the result file."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it ends this process
    log = os.open(paths["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    if limit is not None:
        limit.apply_in_child()
    worker = Worker(job, Path(paths["state"]))
    try:
        run(worker)
        figures = worker.finish()
        if job["device"] == "cuda":
            figures.update(cuda_figures())
        figures.update(status="ok", phase="", detail="")
    except Exception as error:  # the row failed: report it, the parent carries on
        figures = {**worker.finish(), "status": failure_status(error), "phase": worker.phase,
                   "detail": last_line(error)}  # finish() keeps the peaks reached before the failure
        print(f"row failed in {worker.phase}: {figures['detail']}", file=sys.stderr, flush=True)
    write_json_atomic(Path(paths["result"]), figures)
    sys.exit(0 if figures["status"] == "ok" else 1)
