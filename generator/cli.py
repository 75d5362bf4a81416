"""The command line: `memory-budget measure | probe | predict | fit | build | diff`. Parses arguments into typed
requests and reports errors as one line on stderr with exit status 2; the work itself lives in other modules."""

import argparse
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from generator.escaping import plain_terminal_text
from generator.matrix import DEFAULT_ROWS, DEFAULT_SEQ_LEN, RowError, RowSpec, select_rows
from generator.runner import DEFAULT_TIMEOUT_SECONDS
from generator.units import parse_size

EXIT_FAILED_ROWS = 1
EXIT_BAD_INPUT = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above zero: {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 10**7:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def _size(text: str) -> int:
    try:
        return parse_size(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = _Parser(prog="memory-budget", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    for add in (_measure_options, _probe_options, _build_options, _predict_options, _fit_options,
                _diff_options):
        add(commands)
    return parser


def _measure_options(commands: Any) -> None:
    """`measure`'s arguments."""
    measure = commands.add_parser("measure", help="run the measurement matrix; one TOML file per row")
    measure.add_argument("--rows", nargs="+", metavar="ROW",
                         help=f"rows to run (default: {' '.join(DEFAULT_ROWS)}); commas also separate")
    measure.add_argument("--model", help="shipped config name, a config.json, a local folder, or a hub id "
                         "(default: SmolLM2-135M-Instruct's config with random weights)")
    measure.add_argument("--seq", type=_positive_int, default=DEFAULT_SEQ_LEN,
                         help="sequence length of rows that do not name one (default: %(default)s)")
    measure.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    measure.add_argument("--output", type=Path, default=Path("measurements"),
                         help="measurements folder (default: %(default)s)")
    measure.add_argument("--repeats", type=_positive_int,
                         help="repeat rounds, each from a fresh worker server; a row's figure is the median "
                         "(default: 3, and 1 for a row whose first repeat took over 5 minutes)")
    measure.add_argument("--force", action="store_true", help="measure rows already on disk again")
    measure.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT_SECONDS,
                         help="seconds before a row's worker is stopped (default: %(default)s)")
    measure.add_argument("--memory-limit", type=_size, metavar="SIZE",
                         help="cap each worker, e.g. 3GiB (cgroup v2 where possible, else RLIMIT_DATA)")


def _probe_options(commands: Any) -> None:
    """`probe`'s arguments."""
    probe = commands.add_parser("probe", help="run one row under a memory cap and show the phase where it dies")
    probe.add_argument("--row", default="train-b8", help="the row to probe (default: %(default)s)")
    probe.add_argument("--memory-limit", type=_size, metavar="SIZE",
                       help="the cap (default: midway between the row's measured step-1 and step-2 peaks)")
    probe.add_argument("--model", help="as for measure")
    probe.add_argument("--seq", type=_positive_int, default=DEFAULT_SEQ_LEN)
    probe.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    probe.add_argument("--output", type=Path, default=Path("measurements"),
                       help="measurements folder: where the uncapped row is read and the capped row written")
    probe.add_argument("--timeout", type=_positive_seconds, default=DEFAULT_TIMEOUT_SECONDS,
                       help="seconds before the worker is stopped (default: %(default)s)")


def _build_options(commands: Any) -> None:
    """`build`'s arguments."""
    build = commands.add_parser("build", help="turn a measurements folder into site/index.md and index.html")
    build.add_argument("--measurements", type=Path, default=Path("measurements"),
                       help="measurements folder (default: %(default)s)")
    build.add_argument("--env", help="environment to build the article from (default: the newest library versions)")
    build.add_argument("--model", help="the model whose rows to show (default: the shipped model, or the only one)")
    build.add_argument("--output", type=Path, default=Path("site"), help="output folder (default: %(default)s)")


def _predict_options(commands: Any) -> None:
    """`predict`'s arguments."""
    predict = commands.add_parser("predict", help="simulate rows with fake tensors: peak, phase and split")
    predict.add_argument("--rows", nargs="+", metavar="ROW", help="as for measure (default: the default matrix)")
    predict.add_argument("--model", help="as for measure; any causal LM config, however large")
    predict.add_argument("--seq", type=_positive_int, default=DEFAULT_SEQ_LEN,
                         help="sequence length of rows that do not name one (default: %(default)s)")
    predict.add_argument("--format", choices=("text", "json"), default="text")
    predict.add_argument("--measurements", type=Path, default=Path("measurements"),
                         help="where the overhead model is fitted, and --record writes (default: %(default)s)")
    predict.add_argument("--record", action="store_true",
                         help="write each prediction into this environment's measured file of its row")


def _fit_options(commands: Any) -> None:
    """`fit`'s arguments."""
    fit = commands.add_parser("fit", help="the largest batch that fits a budget, by simulation")
    fit.add_argument("--budget", type=_size, metavar="SIZE", help="the memory to fit in, e.g. 24GiB")
    fit.add_argument("--model", help="as for measure")
    fit.add_argument("--seq", type=_positive_int, default=DEFAULT_SEQ_LEN,
                     help="sequence length (default: %(default)s)")
    fit.add_argument("--margin", type=_percentage, default=0.10, metavar="PERCENT",
                     help="kept free for what the simulation does not see (default: 10%%)")
    fit.add_argument("--format", choices=("text", "json"), default="text")
    fit.add_argument("--measurements", type=Path, default=Path("measurements"),
                     help="where the overhead model is fitted (default: %(default)s)")
    fit.add_argument("--confirm", action="store_true",
                     help="measure two real steps at each answer and at the next batch, where they fit this machine")
    fit.add_argument("--record", action="store_true",
                     help="instead: every shipped config against 16, 24, 48 and 80 GiB, into this environment's "
                     "_fit.toml, for the site")


def _diff_options(commands: Any) -> None:
    """`diff`'s arguments."""
    diff = commands.add_parser("diff", help="compare one model's rows between two environments")
    diff.add_argument("before", help="environment folder, or an environment id under --measurements")
    diff.add_argument("after", help="environment folder, or an environment id under --measurements")
    diff.add_argument("--measurements", type=Path, default=Path("measurements"),
                      help="where environment ids are looked up (default: %(default)s)")
    diff.add_argument("--model", help="as for build")
    diff.add_argument("--threshold", type=_percentage, metavar="PERCENT",
                      help="call a change real beyond this, e.g. 2%% (default: each row's noise, at least the floor)")
    diff.add_argument("--format", choices=("text", "md", "json"), default="text",
                      help="text (an aligned table), md (for a pull request) or json (default: %(default)s)")



def _percentage(text: str) -> float:
    from generator.diff import parse_threshold

    try:
        return parse_threshold(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def parse_rows(names: list[str] | None, seq_len: int, memory_limit: int | None) -> tuple[RowSpec, ...]:
    """The rows a user asked for, each under the memory cap if one was given."""
    split = [part for name in (names or DEFAULT_ROWS) for part in name.split(",") if part.strip()]
    if not split:
        raise RowError("--rows names no row")
    rows = select_rows(split, seq_len)
    if memory_limit:
        rows = [row.with_limit(memory_limit) for row in rows]  # parse_row has checked everything else
    return tuple(rows)


EXTRAS = {  # what each command imports beyond the core, and the extra that installs it
    "measure": ("measure", ("torch", "transformers", "peft")),
    "probe": ("measure", ("torch", "transformers", "peft")),
    "predict": ("measure", ("torch", "transformers", "peft")),
    "fit": ("measure", ("torch", "transformers", "peft")),
    "build": ("site", ("jinja2", "markdown_it", "altair", "vl_convert")),
}


def require_extra(command: str) -> None:
    """Say in one line which extra to install, instead of an ImportError's traceback."""
    from importlib.util import find_spec

    if command not in EXTRAS:
        return
    extra, modules = EXTRAS[command]
    missing = [name for name in modules if _missing(name, find_spec)]
    if missing:
        raise UsageError(f"{command} needs the {extra} extra: pip install 'memory-budget[{extra}]' "
                         f"(missing: {', '.join(missing)})")


def _missing(name: str, find_spec: Callable[[str], object]) -> bool:
    if name in sys.modules:
        return sys.modules[name] is None  # None: blocked, as an uninstalled module is in the tests
    try:
        return find_spec(name) is None
    except (ImportError, ValueError):
        return True


def run_measure(args: argparse.Namespace) -> int:
    """`measure`: resolve inputs, run the matrix, print a summary; non-zero if any row failed."""
    from generator.measure import DEFAULT_REPEATS, MeasureRequest, run_matrix
    from generator.model_source import resolve_model
    from generator.progress import MatrixDisplay

    rows = parse_rows(args.rows, args.seq, args.memory_limit)
    if args.device == "cuda":
        _require_cuda()
    request = MeasureRequest(rows=rows, model=resolve_model(args.model), output=args.output,
                             device=args.device, repeats=args.repeats or DEFAULT_REPEATS,
                             repeats_explicit=args.repeats is not None, force=args.force,
                             timeout_seconds=args.timeout)
    with MatrixDisplay() as display:
        report = run_matrix(request, display)
    ok = len(report.written) - len(report.failed)
    print(f"{ok} row(s) measured, {len(report.failed)} failed, {len(report.skipped)} already present "
          f"-> {report.folder}", file=sys.stderr)
    for result in report.failed:
        summary = result.summary
        print(plain_terminal_text(f"  {result.row.id}: {summary.status} in {summary.phase or 'start-up'}: "
                                  f"{summary.detail}"), file=sys.stderr)
    if report.interrupted:
        print("interrupted: the running row was stopped and not written; finished rows are kept",
              file=sys.stderr)
        return EXIT_INTERRUPTED
    return EXIT_FAILED_ROWS if report.failed else 0


def run_probe(args: argparse.Namespace) -> int:
    """`probe`: one capped row, measured and written like any other; exit 0 whether or not it survived."""
    from generator.measure import MeasureRequest, run_matrix
    from generator.model_source import resolve_model
    from generator.probe import describe_outcome, plan_probe
    from generator.progress import MatrixDisplay

    (row,) = parse_rows([args.row], args.seq, None)
    if args.device == "cuda":
        _require_cuda()
    model = resolve_model(args.model)
    plan = plan_probe(row, args.output, args.device, args.memory_limit, model.name)
    print(f"probing {plan.row.id}: cap {plan.reason}", file=sys.stderr)
    request = MeasureRequest(rows=(plan.row,), model=model, output=args.output, device=args.device,
                             repeats=1, repeats_explicit=True, force=True, timeout_seconds=args.timeout)
    with MatrixDisplay() as display:
        report = run_matrix(request, display)
    if report.interrupted:
        return EXIT_INTERRUPTED
    for result in report.written:
        print(plain_terminal_text(describe_outcome(result)), file=sys.stderr)
    return 0


def _require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available to this torch build")


def run_build(args: argparse.Namespace) -> int:
    """`build`: measurements folder -> site/."""
    from generator.site import build_site

    written = build_site(args.measurements, args.output, args.env, args.model)
    print(f"wrote {', '.join(str(path) for path in written)}", file=sys.stderr)
    return 0


def run_predict(args: argparse.Namespace) -> int:
    """`predict`: simulate, print, and optionally record into the measured rows."""
    from generator.environment import collect_environment
    from generator.model_source import resolve_model
    from generator.overhead import overhead_model
    from generator.predict import predict_rows, record, render_json, render_text

    rows = parse_rows(args.rows, args.seq, None)
    source = resolve_model(args.model)
    model = overhead_model(args.measurements, collect_environment().id)
    predictions = predict_rows(rows, source, model)
    sys.stdout.write(render_json(predictions, model) if args.format == "json" else render_text(predictions, model))
    if args.record:
        written = record(predictions, source, args.measurements)
        print(f"recorded {len(written)} prediction(s) into {args.measurements}", file=sys.stderr)
    return 0


def run_fit(args: argparse.Namespace) -> int:
    """`fit`: answers for one budget, or --record the site's table."""
    from generator import store
    from generator.environment import collect_environment
    from generator.fit import Predictor, fit, site_table
    from generator.fit_report import confirm, render_json, render_text
    from generator.fit_results import save_fit
    from generator.model_source import resolve_model
    from generator.overhead import overhead_model

    environment = collect_environment().id
    model = overhead_model(args.measurements, environment)
    if args.record:
        path = save_fit(site_table(model, environment, args.margin), args.measurements / environment)
        print(f"wrote {path}", file=sys.stderr)
        return 0
    if args.budget is None:
        raise UsageError("fit needs --budget (e.g. --budget 24GiB), or --record")
    source = resolve_model(args.model)
    answers = fit(Predictor(source, model), args.seq, args.budget, args.margin)
    render = render_json if args.format == "json" else render_text
    sys.stdout.write(render(answers, source.name, args.budget, args.margin, model))
    if args.confirm:
        sys.stdout.write(confirm(answers, source, store.model_folder(args.measurements, environment, source.name)
                                 .parent.parent))
    return 0


def run_diff(args: argparse.Namespace) -> int:
    """`diff`: exit 0 when no row got worse beyond its threshold, 1 when one did."""
    from rich.console import Console

    from generator import store
    from generator.diff import compare
    from generator.diff_render import render_json, render_markdown, render_terminal

    sides = [store.select(store.resolve_environment(args.measurements, text), args.model)
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
    return EXIT_FAILED_ROWS if comparison.worse else 0


def _refuse(message: str) -> int:
    """Report bad input as one line: characters that would break the line (from the user's input) are escaped."""
    print(f"memory-budget: error: {plain_terminal_text(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of `memory-budget` and `python -m generator`."""
    from generator.lock import LockedError
    from generator.model_source import ModelError
    from generator.output import OutputError
    from generator.results import ResultsError

    signal.signal(signal.SIGTERM, _interrupt)  # stop as cleanly on `kill` as on Ctrl-C
    try:
        args = build_parser().parse_args(argv)
        require_extra(args.command)
        commands = {"measure": run_measure, "probe": run_probe, "build": run_build, "diff": run_diff,
                    "predict": run_predict, "fit": run_fit}
        return commands[args.command](args)
    except (UsageError, RowError, ModelError, ResultsError, LockedError, OutputError) as error:
        return _refuse(str(error))
    except OSError as error:
        return _refuse(f"{error.filename or ''}: {error.strerror or error}")
    except KeyboardInterrupt:
        print("memory-budget: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
