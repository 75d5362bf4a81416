"""`measure --executor local|slurm|debug`: each repeat of each row as one submitit job.

A job runs the same worker path as the default in-process rounds (a fresh worker server, a forked row, caps and
timeouts), on whichever machine runs it, and returns the repeat and that machine's environment. The submitting
command follows the jobs, merges the repeats into row files through the store, and keeps each environment's
repeats apart: the environment id names the machine, so each node type gets its own folder.

- ``local`` runs the jobs one after another as subprocesses of this machine (submitit's LocalExecutor), round
  by round, so they never share the machine's memory with each other; ``debug`` runs them in this process.
- ``slurm`` submits every (row, repeat round) as one element of a job array and follows it.

A job that dies (Slurm's OOM killer, its time limit, preemption, a lost node: submitit's UncompletedJobError)
becomes a repeat with a status and the phase the worker had reached, read from its state file in the job's
shared folder. A rerun submits only rows that are not yet measured under these library versions. Ctrl-C
cancels every job still queued or running."""

import contextlib
import time
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from generator.escaping import one_line_error
from generator.matrix import RowSpec
from generator.measure.environment import collect_environment
from generator.measure.protocol import read_state
from generator.measure.runner import Job, WorkerServer, run_repeat
from generator.store import documents
from generator.store.environment import Environment
from generator.store.records import Repeat

EXECUTORS = ("local", "slurm", "debug")
OPTIONS_FILE = "_slurm.toml"
POLL_SECONDS = 2.0


@dataclass(frozen=True)
class ClusterOptions:
    """How jobs are submitted; from the command line, else measurements/_slurm.toml's [slurm] table."""

    executor: str = "local"
    partition: str = ""
    time_minutes: int = 60
    memory: str = ""  # Slurm's --mem, e.g. "64G"
    gpus: int = 0
    array_parallelism: int = 16
    account: str = ""


def load_options(measurements: Path, given: dict[str, Any]) -> ClusterOptions:
    """The options file's [slurm] table, overridden by what the command line gave (None: not given)."""
    path = measurements / OPTIONS_FILE
    table = documents.load(path, documents.CLUSTER_OPTIONS).get("slurm", {}) if path.is_file() else {}
    known = {spec.name for spec in fields(ClusterOptions)}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ValueError(f"{path}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(known))})")
    return ClusterOptions(**{**table, **{key: value for key, value in given.items() if value is not None}})


@dataclass(frozen=True)
class JobOutcome:
    """What one job sends back: the repeat, how a cap was applied, and the machine it ran on."""

    environment: Environment
    repeat: Repeat
    limit_method: str


def run_job(job: Job, memory_limit_bytes: int, state_folder: str) -> JobOutcome:
    """One array element, on its node: a fresh worker server, one forked repeat of one row."""
    environment = collect_environment(job.device)
    with WorkerServer(job.model, job.row.allocator) as server:
        repeat, method = run_repeat(job, server, memory_limit_bytes, state_folder=Path(state_folder))
    return JobOutcome(environment, repeat, method)


def make_executor(options: ClusterOptions, folder: Path) -> Any:
    """A submitit executor for the options (submitit is imported here: it is an optional extra)."""
    import submitit

    if options.executor == "debug":
        return submitit.DebugExecutor(folder)
    if options.executor == "local":
        local = submitit.LocalExecutor(folder)
        local.update_parameters(timeout_min=options.time_minutes)
        return local
    executor = submitit.SlurmExecutor(folder)
    parameters = {"time": options.time_minutes, "array_parallelism": options.array_parallelism,
                  "job_name": "memory-budget", "partition": options.partition or None,
                  "mem": options.memory or None, "gpus_per_node": options.gpus or None,
                  "account": options.account or None}
    executor.update_parameters(**{key: value for key, value in parameters.items() if value is not None})
    return executor


@dataclass(frozen=True)
class Submission:
    """One job: its row, its round, where its worker keeps its state, and submitit's handle."""

    row: RowSpec
    round: int
    state_folder: Path
    handle: Any


def submit(executor: Any, specs: list[tuple[Job, int, int, Path]]) -> list[Submission]:
    """Submit (job, cap, round, state folder) each as one job; on Slurm, all in one array."""
    handles = []
    with executor.batch() if len(specs) > 1 else contextlib.nullcontext():
        for job, cap, _, folder in specs:
            handles.append(executor.submit(run_job, job, cap, str(folder)))
    return [Submission(job.row, number, folder, handle)
            for (job, _, number, folder), handle in zip(specs, handles, strict=True)]


def outcome(submission: Submission, environment: Environment) -> JobOutcome:
    """A finished job's outcome; a job that died becomes a repeat with its status and the phase reached."""
    from submitit.core.utils import FailedJobError, UncompletedJobError

    try:
        return submission.handle.result()
    except UncompletedJobError as error:
        status = "timeout" if "timed-out" in str(error) or "TIMEOUT" in str(error) else "killed"
        return JobOutcome(environment, _died(submission, status, one_line_error(error)), "")
    except FailedJobError as error:
        return JobOutcome(environment, _died(submission, "error", one_line_error(error)), "")


def _died(submission: Submission, status: str, detail: str) -> Repeat:
    """The repeat of a job that did not return: how far its worker got, from its shared state file."""
    return read_state(submission.state_folder).failed(status, f"the job died: {detail}")


def follow(submissions: list[Submission], on_done: Any, environment: Environment) -> None:
    """Wait for every job, handing each outcome to on_done(submission, outcome) as it finishes; Ctrl-C
    cancels the jobs still queued or running."""
    pending = list(submissions)
    try:
        while pending:
            finished = [s for s in pending if s.handle.done()]
            for submission in finished:
                pending.remove(submission)
                on_done(submission, outcome(submission, environment))
            if pending and not finished:
                time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        for submission in pending:
            submission.handle.cancel(check=False)
        raise


def with_timeout(job: Job, options: ClusterOptions) -> Job:
    """A worker timeout inside the job's own limit, so the worker reports a timeout before the cluster kills it."""
    return replace(job, timeout_seconds=min(job.timeout_seconds, options.time_minutes * 60 * 0.95))
