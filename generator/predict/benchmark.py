"""The speed and memory of `predict` itself, recorded as a benchmark (not a timed test):
`python -m generator.benchmark` (or `nox -s benchmark`) runs each case in a fresh process and appends its wall
time and peak resident memory to measurements/<environment>/_benchmarks.toml."""

import os
import subprocess
import sys
import time
from pathlib import Path

from generator.measure.environment import collect_environment
from generator.store import runlog

CASES = (("SmolLM2-135M-Instruct", "train-b8"), ("Qwen2-0.5B", "train-b8"), ("Llama-2-7b", "train-b8"),
         ("Llama-2-7b", "train-b1-s4096-lora8"), ("Llama-2-7b", "gen-b1-s512-n32-bf16"),
         ("Llama-2-7b", "train-b1-s512-amp"), ("Llama-2-7b", "train-b8-s2048-bf16-lora8"))
# seconds, from the issues that asked for predict: 15 s a row for the small models, 60 s for a 7B
TARGETS = {"SmolLM2-135M-Instruct": 15.0, "Qwen2-0.5B": 15.0, "Llama-2-7b": 60.0}
MEMORY_TARGET_BYTES = 2 * 2**30


def run_case(model: str, row: str) -> dict:
    """One `predict` in a fresh process: wall seconds and that process's own peak resident memory."""
    started = time.perf_counter()
    child = subprocess.Popen([sys.executable, "-m", "generator", "predict", "--model", model, "--rows", row,
                              "--format", "json"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(child.pid, 0)  # the rusage of this child alone
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise SystemExit(f"predict --model {model} --rows {row} failed with status {child.returncode}")
    return {"model": model, "row": row, "wall_seconds": round(time.perf_counter() - started, 2),
            "peak_rss_bytes": usage.ru_maxrss * 1024,  # KiB on Linux
            "target_seconds": TARGETS.get(model, 0.0), "target_peak_rss_bytes": MEMORY_TARGET_BYTES}


def main(measurements: Path = Path("measurements")) -> None:
    """Run every case and append the results."""
    environment = collect_environment().id
    results = [run_case(model, row) for model, row in CASES]
    for case in results:
        print(f"{case['model']} {case['row']}: {case['wall_seconds']:.1f} s, "
              f"{case['peak_rss_bytes'] / 2**20:,.0f} MiB peak", file=sys.stderr)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    runlog.record_benchmark(measurements / environment, "predict", {"at": stamp, "cases": results})


if __name__ == "__main__":
    main()
