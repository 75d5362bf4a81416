"""Simulations side by side (generator/predict/parallel.py): forked workers must not hang on torch's thread pool."""

import subprocess
import sys
import textwrap

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
