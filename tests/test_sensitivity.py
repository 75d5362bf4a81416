"""Sensitivity is tested, not assumed: the worker's MEMORY_BUDGET_EXTRA hook holds a known extra allocation
through step 2, and `diff` under the tuned allocator must flag it while two runs without it read `same`.
(On SmolLM2 the recorded benchmark, `python -m generator.diff.sensitivity`, goes down to +1 %; a tiny
config's rows are too small for that against the 4 MiB floor.)"""

import os
from pathlib import Path

import pytest
from conftest import TINY_MODEL, run_cli

from generator.diff.sensitivity import verdicts

pytestmark = pytest.mark.slow  # simulates configs at scale or starts processes that import torch

ROW = "train-b16-s512-glibc-tuned"  # about 200 MiB net: +5 % is 10 MiB, past the 4 MiB floor


def _measure(folder: Path, extra: str) -> Path:
    env = {**os.environ, "MEMORY_BUDGET_EXTRA": extra}
    result = run_cli("measure", "--model", str(TINY_MODEL), "--rows", ROW, "--output", str(folder), env=env)
    assert result.returncode == 0, result.stderr
    (environment,) = [path for path in folder.iterdir() if path.is_dir()]
    return environment


def test_diff_flags_an_injected_five_percent_and_not_a_second_run(tmp_path: Path) -> None:
    base, again, more = (_measure(tmp_path / name, extra) for name, extra in
                         (("base", "0"), ("again", "0"), ("more", "0.05")))
    (same,) = verdicts(base, again)
    (flagged,) = verdicts(base, more)
    assert same["verdict"] == "same" and abs(same["change"]) < 0.01, same
    assert flagged["verdict"] == "more" and 0.03 < flagged["change"] < 0.08, flagged
