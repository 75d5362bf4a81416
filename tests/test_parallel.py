"""Simulations side by side (generator/predict/parallel.py): forked workers must not hang on torch's thread pool."""

import os
import subprocess
import sys
import textwrap
import time

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


def test_a_worker_takes_the_next_task_of_the_family_it_ran_last() -> None:
    """Tasks of a family (fit's set-ups that import peft and bitsandbytes, and the others) are run by the worker
    that ran one before; taken in order, as a plain pool takes them, each worker would run both families here.
    Answers come back in the order asked."""
    families = ["a", "b", "b", "a", "a", "b"]
    found = parallel.starmap(_after, [(0.5, index) for index in range(6)], 2, families)
    assert [value for value, _ in found] == list(range(6))
    workers = {family: {pid for (_, pid), own in zip(found, families, strict=True) if own == family} for family in "ab"}
    assert len(workers["a"]) == len(workers["b"]) == 1 and workers["a"] != workers["b"]
