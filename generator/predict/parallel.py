"""Simulations run side by side in worker processes, one task each, answers in the order asked.

A simulation is single-threaded Python (fake tensors do no arithmetic), so a machine with n cores runs n at
once. Workers are forked where the platform allows it, so they share the parent's imported torch and
transformers instead of importing them again (seconds each); elsewhere they are spawned. With one worker, or
one task, everything runs here, in order, exactly as before."""

import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Sequence
from typing import Any


def default_workers() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _quiet_worker() -> None:
    """A worker leaves Ctrl-C to the parent, which stops it, and a stop ends it without a word on stderr.

    A forked worker also runs torch on one thread: GNU OpenMP's thread pool does not survive fork(), so a
    parent that ever ran a parallel op leaves its forked child hanging on the first op large enough to split
    (the real-tensor mask check of a large batch). A simulation is single-threaded Python anyway."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def starmap(function: Callable[..., Any], tasks: Sequence[tuple], workers: int) -> list[Any]:
    """function(*task) for every task, in worker processes when there are several workers and tasks. A task
    that raises raises here, as it would have run in order; an interrupted parent stops its workers at once."""
    workers = min(workers, len(tasks))
    if workers <= 1:
        return [function(*task) for task in tasks]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with multiprocessing.get_context(method).Pool(workers, initializer=_quiet_worker) as pool:  # exit: terminate
        return pool.starmap(function, tasks, chunksize=1)
