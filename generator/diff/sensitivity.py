"""What `diff` can see: rows measured with a known extra allocation held through step 2 (the worker's
MEMORY_BUDGET_EXTRA hook: 0, 1, 2 and 5 % of step 1's net peak) diffed against the same rows measured with
none, under each allocator. `python -m generator.diff.sensitivity BASE SHARE=FOLDER ...` prints the verdicts and
appends them to the environment's _benchmarks.toml under [[sensitivity]]. torch-free, like all of diff."""

import sys
import time
from pathlib import Path

from generator.diff.compare import compare
from generator.store import runlog
from generator.store.catalog import Catalog


def verdicts(base: Path, changed: Path) -> list[dict]:
    """Each row's verdict, change and threshold, the changed side against the base side."""
    before, after = Catalog(base.parent).select(base, None), Catalog(changed.parent).select(changed, None)
    return [{"row": row.row, "verdict": row.verdict, "change": round(row.change, 4),
             "threshold": round(row.threshold, 4)} for row in compare(before, after).rows if row.compared]


def main(arguments: list[str]) -> None:
    """BASE is the environment folder of the 0 % rows; each SHARE=FOLDER another's, with that extra held."""
    base = Path(arguments[0])
    cases = []
    for argument in arguments[1:]:
        share, _, folder = argument.partition("=")
        for found in verdicts(base, Path(folder)):
            cases.append({"injected": float(share), **found})
            print(f"+{float(share):.0%} {found['row']}: {found['verdict']} ({found['change']:+.2%} against a "
                  f"{found['threshold']:.2%} threshold)", file=sys.stderr)
    runlog.record_benchmark(Path("measurements") / base.name, "sensitivity",
                            {"at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "cases": cases})


if __name__ == "__main__":
    main(sys.argv[1:])
