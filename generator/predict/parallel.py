"""Simulations run side by side in worker processes, answers in the order asked.

A simulation is single-threaded Python (fake tensors do no arithmetic), so a machine with n cores runs n at
once. Workers are forked where the platform allows it, so they share the parent's imported torch and
transformers instead of importing them again (seconds each); elsewhere they are spawned. With one worker, or
one task, everything runs here, in order, exactly as before.

Each worker takes one task at a time, in the order given, as it becomes free. Tasks may have a family (``families``):
a worker then takes the next task of the family it ran last before any other, so that what a family's first task
costs once per process (peft and bitsandbytes imported, FakeTensorMode's answers for a dtype learnt) is paid by as
few workers as there are families being run. Only the wall time depends on it: each task is run on its own.

Python's cyclic collector is kept off the workers' time. The parent's objects are frozen before the fork (a
worker's collections never walk them, nor touch their pages), and a worker collects only between tasks, once it
has made COLLECT_PAST objects since its last collection, freezing what is left alive (its caches) so that the next
collection walks only what later tasks made. The collector's passes had cost a worker a tenth of its time, and a
pass after every task still cost a GPU fit 0.7 s of its 11.8 s: each walked every object the task made, imports and
caches included. A worker's garbage is bounded by that count, some hundred MiB: fit's ten set-ups stay under it, and
refresh's hundreds of curves collect every dozen or so."""

import gc
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Hashable, Sequence
from typing import Any

_CLAIMED: Any = None  # in a worker: which tasks are taken, one flag each, with the lock that guards them
COLLECT_PAST = 2_000_000  # objects a worker makes (net, of the kinds the collector tracks) between its collections


def default_workers() -> int:
    """The cores this process may use."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def _quiet_worker(claimed: Any) -> None:
    """A worker leaves Ctrl-C to the parent, which stops it, and a stop ends it without a word on stderr.

    A forked worker also runs torch on one thread: GNU OpenMP's thread pool does not survive fork(), so a
    parent that ever ran a parallel op leaves its forked child hanging on the first op large enough to split
    (the real-tensor mask check of a large batch). A simulation is single-threaded Python anyway."""
    global _CLAIMED
    _CLAIMED = claimed
    gc.disable()  # a worker collects between its tasks (_work)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(1)


def _claim(families: Sequence[Hashable], last: Hashable) -> int | None:
    """The next task free to take: the first of the family run last, else the first; None when all are taken."""
    with _CLAIMED.get_lock():
        free = [index for index, taken in enumerate(_CLAIMED) if not taken]
        chosen = next((index for index in free if families[index] == last), free[0] if free else None)
        if chosen is not None:
            _CLAIMED[chosen] = 1
    return chosen


def _work(function: Callable[..., Any], tasks: Sequence[tuple], families: Sequence[Hashable]) -> list[tuple[int, Any]]:
    """One worker's share: tasks taken one at a time until none is left, each with its index; the collector
    run before a task once COLLECT_PAST objects were made since its last run (never after the last task)."""
    done: list[tuple[int, Any]] = []
    last: Hashable = None
    while (index := _claim(families, last)) is not None:
        if gc.get_count()[0] > COLLECT_PAST:
            gc.collect()  # the earlier tasks' cycles; what is left alive is kept, unwalked by the next collection
            gc.freeze()
        done.append((index, function(*tasks[index])))
        last = families[index]
    return done


def starmap(function: Callable[..., Any], tasks: Sequence[tuple], workers: int,
            families: Sequence[Hashable] | None = None) -> list[Any]:
    """function(*task) for every task, in worker processes when there are several workers and tasks, with
    ``families`` one a task (the module's rule); the answers in the tasks' order. A task that raises raises here;
    an interrupted parent stops its workers at once."""
    if families is not None and len(families) != len(tasks):
        raise ValueError(f"{len(families)} families for {len(tasks)} tasks")
    workers = min(workers, len(tasks))
    if workers <= 1:
        return [function(*task) for task in tasks]
    method = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    context = multiprocessing.get_context(method)
    claimed = context.Array("b", len(tasks))
    shares = [(function, tasks, families or [None] * len(tasks))] * workers
    gc.freeze()  # the objects the workers inherit: no collection of theirs walks them
    try:
        with context.Pool(workers, initializer=_quiet_worker, initargs=(claimed,)) as pool:  # exit: terminate
            found = dict(pair for share in pool.starmap(_work, shares, chunksize=1) for pair in share)
    finally:
        gc.unfreeze()  # the parent collects as before
    return [found[index] for index in range(len(tasks))]
