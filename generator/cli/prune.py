"""`memory-budget prune [--delete]`: the environment folders a newer one of their release supersedes, by the
rule in generator/store/prune.py; listed, and with --delete removed. The last environment of a release, a
folder holding the fit page's curves, rows no newer environment holds, or anything this tool does not write is
never removed."""

import argparse
import sys

from generator.escaping import plain_terminal_text


def add_parser(commands: argparse._SubParsersAction, shared: dict) -> None:
    prune = commands.add_parser(
        "prune", help="list the environments a newer one of their release supersedes; --delete removes them",
        parents=[shared["measurements"]])
    prune.add_argument("--delete", action="store_true",
                       help="remove the superseded environment folders (without it, only list them)")


def run_prune(args: argparse.Namespace) -> int:
    from generator.store.prune import prune_plan, retire

    plan = prune_plan(args.measurements)
    for decision in plan:
        verb = ("removed" if args.delete else "would remove") if decision.retired else "keeps"
        print(plain_terminal_text(f"{verb} {decision.folder.name}: {decision.reason}"))
    retired = [decision for decision in plan if decision.retired]
    if args.delete:
        removed = retire(retired)
        print(f"removed {len(removed)} of {len(plan)} environment folders", file=sys.stderr)
    elif retired:
        print(f"{len(retired)} of {len(plan)} environment folders are superseded: --delete removes them",
              file=sys.stderr)
    return 0
