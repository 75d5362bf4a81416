"""`diff`: two environments' rows compared (generator/diff/), rendered for a terminal, Markdown or JSON; it
never imports torch."""

import argparse
import sys

EXIT_WORSE = 1  # a row got worse beyond its threshold


def run_diff(args: argparse.Namespace) -> int:
    """`diff`: exit 0 when no row got worse beyond its threshold, 1 when one did."""
    from rich.console import Console

    from generator.diff.compare import compare
    from generator.diff.render import render_json, render_markdown, render_terminal
    from generator.store.catalog import Catalog
    from generator.store.layout import resolve_environment

    catalog = Catalog(args.measurements)
    sides = [catalog.select(resolve_environment(args.measurements, text), args.model)
             for text in (args.before, args.after)]
    comparison = compare(sides[0], sides[1], override=args.threshold)
    if args.format == "json":
        sys.stdout.write(render_json(comparison))
    elif args.format == "md":
        sys.stdout.write(render_markdown(comparison))
    else:
        console = Console(highlight=False)
        if not console.is_terminal:
            console = Console(highlight=False, width=200)  # a log or a pipe: no reason to wrap the table
        render_terminal(comparison, console)
    return EXIT_WORSE if comparison.worse else 0
