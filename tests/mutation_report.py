"""The mutation score per module, from `mutmut results --all true`: killed (and timed out) over all mutants,
a mutant no test ran counting as one that survived. Written to tests/mutation-report.toml by `nox -s mutation`."""

import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import tomli_w

KILLED = ("killed", "timeout")


def main() -> None:
    lines = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    counts: dict[str, Counter] = defaultdict(Counter)
    for line in lines:
        name, _, status = line.strip().rpartition(": ")
        if "__mutmut_" in name:
            module = name.split(".x_")[0].split(".xǁ")[0]
            counts[module][status] += 1
    report = {}
    for module, count in sorted(counts.items()):
        total = sum(count.values())
        killed = sum(count[status] for status in KILLED)
        report[module] = {"mutants": total, "killed": killed, "score": round(killed / total, 3),
                          **{status.replace(" ", "_"): n for status, n in count.items() if status not in KILLED}}
        print(f"{module:32} {killed:4} / {total:4} killed ({killed / total:.0%})", dict(count))
    Path("tests/mutation-report.toml").write_text(tomli_w.dumps({"modules": report}), encoding="utf-8")


if __name__ == "__main__":
    main()
