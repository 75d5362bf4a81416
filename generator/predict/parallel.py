"""Simulations run side by side in worker processes, one task each, answers in the order asked.

A simulation is single-threaded Python (fake tensors do no arithmetic), so a machine with n cores runs n at
once. Workers are forked where the platform allows it, so they share the parent's imported torch and
transformers instead of importing them again (seconds each); elsewhere they are spawned. With one worker, or
one task, everything runs here, in order, exactly as before."""

import multiprocessing
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from typing import Any


def default_workers() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def starmap(function: Callable[..., Any], tasks: Sequence[tuple], workers: int) -> list[Any]:
    """function(*task) for every task, in worker processes when there are several workers and tasks. A task
    that raises raises here, as it would have run in order."""
    workers = min(workers, len(tasks))
    if workers <= 1:
        return [function(*task) for task in tasks]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    with ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method)) as pool:
        futures = [pool.submit(function, *task) for task in tasks]
        return [future.result() for future in futures]
