"""`memory-budget published [--record]`: the published-figures suite (measurements/_published/), each entry's
recipe simulated as the GPU's program runs it, against the figure its source published.

Without --record it prints the table and exits 1 where an entry is outside its band (or could not be
simulated); with --record it also writes the answers to _published/_predicted.toml, which `build` places on the
page "Checked against published GPU measurements"."""

import argparse
import sys

EXIT_OUTSIDE = 1


def add_parser(commands: argparse._SubParsersAction, shared: dict) -> None:
    published = commands.add_parser(
        "published", help="simulate the published GPU figures' recipes and compare (measurements/_published/)",
        parents=[shared["measurements"]])
    published.add_argument("--record", action="store_true",
                           help="write the answers to _published/_predicted.toml for the site")
    published.add_argument("--jobs", type=int, choices=range(1, 65), default=1, metavar="N",
                           help="entries simulated side by side, one process each (default: 1)")


def run_published(args: argparse.Namespace) -> int:
    from generator.answers.published import judge, qlora_allowance
    from generator.predict.published import simulate_suite
    from generator.store import published
    from generator.store.records import ResultsError

    entries = published.load_suite(args.measurements)
    if not entries:
        raise ResultsError(f"{published.folder(args.measurements)}: no published-figures suite")
    answers = simulate_suite(entries, args.jobs)
    if args.record:
        print(f"wrote {published.write_predicted(args.measurements, answers)}", file=sys.stderr)
    judged = judge(entries, answers)
    print(render(judged, answers))
    allowance = qlora_allowance(judged)
    if allowance is not None:
        print(f"QLoRA's allowance: x{allowance.factor:.3f}, from {allowance.entries} QLoRA entries "
              f"(set by {allowance.worst})")
    return 0 if all(j.within for j in judged) else EXIT_OUTSIDE


def render(judged: list, answers) -> str:  # judged: list[Judged]; answers: PredictedFile
    """The table: published, predicted (simulated GPU tensor peak), error and verdict, one line an entry."""
    from generator.escaping import plain_terminal_text
    from generator.store import published

    reasons = {p.id: p.error for p in answers.entries}
    lines = [f"simulated under {answers.libraries}", f"{'entry':24} {'published':>16} {'predicted':>12} "
             f"{'error':>8}  verdict"]
    for j in judged:
        figure = f"{j.entry.published} {j.entry.source.unit}"
        if j.error is None:
            lines.append(f"{j.entry.id:24} {figure:>16} {'-':>12} {'-':>8}  not simulated: "
                         f"{plain_terminal_text(reasons.get(j.entry.id, ''))}")
            continue
        predicted = j.predicted.gpu_tensor_peak_bytes / published.UNITS[j.entry.source.unit]
        low, high = j.entry.band
        verdict = "within" if j.within else f"outside {low:+.0%} / {high:+.0%}"
        lines.append(f"{j.entry.id:24} {figure:>16} {predicted:>8.2f} {j.entry.source.unit:3} "
                     f"{j.error:>+8.1%}  {verdict}")
    return "\n".join(lines)
