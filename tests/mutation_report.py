"""The mutation score per module, from `mutmut results --all true`, written to tests/mutation-report.toml by
`nox -s mutation`.

A mutant counts as killed when a test failed or timed out. A surviving mutant is either listed in
tests/mutation-equivalent.toml with the reason no test can tell it apart (it behaves like the original on
every input the program can reach), or it stays in the report as a survivor to kill. The score is killed
over the mutants that are not equivalent; a mutant no test ran counts as a survivor."""

import subprocess
import sys
import tomllib
from collections import Counter, defaultdict
from pathlib import Path

import tomli_w

KILLED = ("killed", "timeout")
EQUIVALENT = Path("tests/mutation-equivalent.toml")


def statuses() -> dict[str, str]:
    lines = subprocess.run([sys.executable, "-m", "mutmut", "results", "--all", "true"], capture_output=True,
                           text=True, check=True).stdout.splitlines()
    found = {}
    for line in lines:
        name, _, status = line.strip().rpartition(": ")
        if "__mutmut_" in name:
            found[name] = status
    return found


def module_of(name: str) -> str:
    return name.split(".x_")[0].split(".xǁ")[0]


def main() -> None:
    equivalent = tomllib.loads(EQUIVALENT.read_text(encoding="utf-8"))["equivalent"]
    counts: dict[str, Counter] = defaultdict(Counter)
    survivors: dict[str, list[str]] = defaultdict(list)
    for name, status in sorted(statuses().items()):
        module = module_of(name)
        if status in KILLED:
            counts[module]["killed"] += 1
            if name in equivalent:
                print(f"{name} is listed as equivalent but a test kills it: take it off the list")
        elif name in equivalent:
            counts[module]["equivalent"] += 1
        else:
            counts[module]["survived"] += 1
            survivors[module].append(name)
    report = {}
    for module, count in sorted(counts.items()):
        total = sum(count.values())
        judged = total - count["equivalent"]
        score = count["killed"] / judged if judged else 1.0
        report[module] = {"mutants": total, "killed": count["killed"], "equivalent": count["equivalent"],
                          "survived": count["survived"], "score": round(score, 3),
                          "survivors": survivors[module]}
        print(f"{module:32} {count['killed']:4} / {judged:4} killed ({score:.0%}), "
              f"{count['equivalent']} equivalent, {count['survived']} survived")
    Path("tests/mutation-report.toml").write_text(tomli_w.dumps({"modules": report}), encoding="utf-8")


if __name__ == "__main__":
    main()
