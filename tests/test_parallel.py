"""Simulations side by side (generator/predict/parallel.py): forked workers must not hang on torch's thread pool, a
worker keeps to the family of set-ups it ran last, and the answers come back in the order asked."""

import itertools
import multiprocessing
import os
import subprocess
import sys
import textwrap
import time

import pytest

from generator.predict import parallel

# The parent runs an op large enough for torch to split across threads, then forks workers that each run one:
# GNU OpenMP's pool does not survive fork(), so without care the children wait forever for threads they lack.
SCRIPT = textwrap.dedent("""
    import torch
    from generator.predict import parallel

    def work(n):
        return int(torch.diff(torch.arange(n).expand(4, n)).sum())

    torch.set_num_threads(2)
    assert work(1 << 20) > 0
    print(parallel.starmap(work, [(1 << 20,), (1 << 21,)], 2))
""")


def test_forked_workers_finish_after_the_parent_ran_a_parallel_op() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [f"[{4 * ((1 << 20) - 1)},", f"{4 * ((1 << 21) - 1)}]"]


def _after(seconds: float, value: int) -> tuple[int, int]:
    time.sleep(seconds)
    return value, os.getpid()


def test_a_worker_takes_the_next_task_of_the_family_it_ran_last(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tasks of a family (fit's set-ups that import peft and bitsandbytes, and the others) go to the worker that
    ran one before: two workers claiming in turn keep to a family each. Taken in order, as a plain pool takes them,
    each would run both families here ({1: [0, 2, 4], 2: [1, 3, 5]}). Claimed with the flags' lock, as a worker
    claims; the workers are simulated here, so that no worker's late start decides the test."""
    families = ["a", "b", "b", "a", "a", "b"]
    monkeypatch.setattr(parallel, "_CLAIMED", multiprocessing.Array("b", len(families)))
    taken: dict[int, list[int]] = {1: [], 2: []}
    last: dict[int, str | None] = {1: None, 2: None}
    for worker in itertools.cycle((1, 2)):
        index = parallel._claim(families, last[worker])
        if index is None:
            break
        taken[worker].append(index)
        last[worker] = families[index]
    assert taken == {1: [0, 3, 4], 2: [1, 2, 5]}


def test_tasks_with_families_answer_in_the_order_asked() -> None:
    """Run in worker processes, every task is run once and the answers come back in the order asked."""
    found = parallel.starmap(_after, [(0.05, index) for index in range(6)], 2, ["a", "b", "b", "a", "a", "b"])
    assert [value for value, _ in found] == list(range(6))


def _garbage(count: int) -> int:
    for _ in range(count):  # cycles that only the collector frees
        cycle: list = []
        cycle.append(cycle)
    return count


def test_a_worker_collects_between_tasks_once_it_made_enough_and_never_after_the_last(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker's collector runs before a task once the tasks before it made more than COLLECT_PAST objects since
    its last run: never after the last task, whose cycles die with the worker."""
    collections: list[int] = []
    monkeypatch.setattr(parallel.gc, "collect", lambda: collections.append(parallel.gc.get_count()[0]) or 0)
    monkeypatch.setattr(parallel, "COLLECT_PAST", 10_000)
    monkeypatch.setattr(parallel, "_CLAIMED", multiprocessing.Array("b", 4))
    was_on = parallel.gc.isenabled()
    parallel.gc.disable()
    parallel.gc.freeze()
    try:
        done = parallel._work(_garbage, [(6_000,), (6_000,), (100,), (20_000,)], [None] * 4)
    finally:
        parallel.gc.unfreeze()
        if was_on:
            parallel.gc.enable()
    assert [index for index, _ in done] == [0, 1, 2, 3]
    assert len(collections) == 1 and collections[0] > 10_000  # before the third task, and not after the fourth
