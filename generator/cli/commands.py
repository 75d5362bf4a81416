"""What each command does with its parsed arguments. Each imports its stage when it runs, so `build` and
`diff` never import torch, and a missing extra is named in one line (require_extra) before any import."""

import argparse
import sys
from collections.abc import Callable
from importlib.util import find_spec

from generator.cli.arguments import parse_rows, resolved_model
from generator.cli.diff_command import run_diff
from generator.cli.errors import UsageError
from generator.cli.gpu_kit import run_gpu
from generator.cli.prune import run_prune
from generator.cli.published import run_published
from generator.cli.sharding import kinds_here, refuse_sharded, sharding_asked
from generator.escaping import plain_terminal_text
from generator.matrix import DEFAULT_SEQ_LEN, Mode, RowSpec, under_allocators

EXIT_FAILED_ROWS = 1
EXIT_INTERRUPTED = 130
_MEASURING = ("measure", ("torch", "transformers", "peft"))
EXTRAS = {  # what each command imports beyond the core, and the extra that installs it
    **dict.fromkeys(("measure", "probe", "predict", "fit", "refresh", "gpu", "published"), _MEASURING),
    "history": ("measure", ("torch", "transformers")),
    "build": ("site", ("jinja2", "markdown_it", "altair", "vl_convert")),
    "cluster": ("cluster", ("submitit",)),
}


def require_extra(command: str) -> None:
    """Say in one line which extra to install, instead of an ImportError's traceback."""
    if command not in EXTRAS:
        return
    extra, modules = EXTRAS[command]
    missing = [name for name in modules if _missing(name, find_spec)]
    if missing:
        raise UsageError(f"{command} needs the {extra} extra: pip install 'memory-budget[{extra}]' "
                         f"(missing: {', '.join(missing)})")


def _missing(name: str, find: Callable[[str], object]) -> bool:
    if name in sys.modules:
        return sys.modules[name] is None  # None: blocked, as an uninstalled module is in the tests
    try:
        return find(name) is None
    except (ImportError, ValueError):
        return True


def _require_cuda(device: str) -> None:
    if device != "cuda":
        return
    import torch

    if not torch.cuda.is_available():
        raise UsageError("--device cuda: no CUDA device is available to this torch build")


def _under_allocators(rows: tuple[RowSpec, ...], allocators: list[str] | None) -> tuple[RowSpec, ...]:
    """The rows under each allocator asked for; one clear line for an allocator this machine lacks."""
    from generator.measure.allocator import AllocatorError, check_available

    rows = tuple(under_allocators(list(rows), allocators or []))
    try:
        check_available(sorted({row.allocator for row in rows}))
    except AllocatorError as error:
        raise UsageError(str(error)) from None
    return rows


def run_measure(args: argparse.Namespace) -> int:
    """`measure`: resolve inputs, run the matrix, print a summary; non-zero if any row failed."""
    from generator.measure.matrix_run import DEFAULT_REPEATS, MeasureRequest, measure_rows

    rows = _under_allocators(parse_rows(args.rows, args.seq, args.memory_limit), args.allocator)
    refuse_sharded(rows)
    _require_cuda(args.device)
    request = MeasureRequest(rows=rows, model=resolved_model(args, rows), output=args.output,
                             device=args.device, repeats=args.repeats or DEFAULT_REPEATS,
                             repeats_explicit=args.repeats is not None, force=args.force,
                             timeout_seconds=args.timeout)
    report = measure_rows(request) if args.executor == "rounds" else _measure_on_executor(request, args)
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


def _measure_on_executor(request, args: argparse.Namespace):  # -> MatrixReport; imports kept local
    """The matrix as submitit jobs (generator/measure/cluster.py)."""
    from generator.measure.cluster import load_options
    from generator.measure.cluster_run import run_cluster_matrix
    from generator.measure.progress import MatrixDisplay

    require_extra("cluster")
    keys = ("partition", "time_minutes", "memory", "gpus", "array_parallelism", "account")
    try:
        options = load_options(args.output, {"executor": args.executor, **{key: getattr(args, key) for key in keys}})
    except (ValueError, TypeError) as error:
        raise UsageError(str(error)) from None
    with MatrixDisplay() as display:
        return run_cluster_matrix(request, display, options)


def run_probe(args: argparse.Namespace) -> int:
    """`probe`: one capped row, measured and written like any other; exit 0 whether or not it survived."""
    from generator.measure.matrix_run import MeasureRequest, measure_rows
    from generator.measure.probe import describe_outcome, plan_probe

    (row,) = _under_allocators(parse_rows([args.row], args.seq, None), [args.allocator])
    refuse_sharded((row,))
    _require_cuda(args.device)
    model = resolved_model(args, (row,))
    plan = plan_probe(row, args.output, args.device, args.memory_limit, model)
    print(f"probing {plan.row.id}: cap {plan.reason}", file=sys.stderr)
    report = measure_rows(MeasureRequest(rows=(plan.row,), model=model, output=args.output, device=args.device,
                                         repeats=1, repeats_explicit=True, force=True,
                                         timeout_seconds=args.timeout))
    if report.interrupted:
        return EXIT_INTERRUPTED
    for result in report.written:
        print(plain_terminal_text(describe_outcome(result)), file=sys.stderr)
    return 0


def run_refresh(args: argparse.Namespace) -> int:
    """`refresh`: what this environment's page still needs after measuring; exit 0 once it is current."""
    from generator.cli.refresh import refresh

    refresh(resolved_model(args, ()), args.measurements, args.seq)  # prints each step's outcome as it goes
    return 0


def run_history(args: argparse.Namespace) -> int:
    """`history`: the rows' tensor peaks under the transformers release installed, into the history file; or,
    with --not-installable, a release that could not be installed, with the reason."""
    from generator.store.history import ReleaseEntry, history_path, save_release

    rows = tuple(row for row in parse_rows(args.rows, args.seq, None) if row.mode != Mode.BASELINE)
    if args.not_installable:
        version, _, reason = args.not_installable.partition(":")
        name = _model_name(args)
        entry = ReleaseEntry(transformers=version, torch="", peft="", seconds=0.0, rows=(),
                             error=f"could not be installed: {reason.strip() or 'pip failed'}")
    else:
        from generator.predict.history import record_release

        source = resolved_model(args, rows)
        name, entry = source.name, record_release(rows, source)
    path = save_release(history_path(args.measurements, name), entry)
    failed = [peak.row for peak in entry.rows if peak.error]
    print(plain_terminal_text(f"transformers {entry.transformers}: {len(entry.rows) - len(failed)} row(s) simulated"
                              f"{f', failed: {chr(32).join(failed)}' if failed else ''}{entry.error} "
                              f"({entry.seconds:.0f} s) -> {path}"), file=sys.stderr)
    return EXIT_FAILED_ROWS if failed or entry.error else 0


def _model_name(args: argparse.Namespace) -> str:
    from generator.model_source import resolve_model

    return resolve_model(args.model).name


def run_build(args: argparse.Namespace) -> int:
    """`build`: measurements folder -> site/."""
    from generator.report.site import build_site

    written = build_site(args.measurements, args.output, args.env, args.model, args.force)
    print(f"wrote {', '.join(str(path) for path in written)}", file=sys.stderr)
    return 0


def _process_model(measurements, allocator: str, target: str = "cpu"):  # -> ProcessModel; a GPU's answers need none
    from dataclasses import replace

    from generator.answers.overhead import overhead_model
    from generator.budget import ProcessModel
    from generator.measure.environment import collect_environment
    from generator.store.catalog import Catalog
    from generator.store.layout import reading_root

    if target != "cpu":  # they add the caching allocator's reserve, not this machine's process overhead: no rows read
        return ProcessModel(0.0, 0.0, 0, "no overhead modelled: a GPU budget holds the allocator's reserve")
    root, note = reading_root(measurements)  # the folder given, else the measurements shipped with the tool
    model = overhead_model(Catalog(root), collect_environment(), allocator)
    return replace(model, source=model.source + note) if model.rows else model


def run_predict(args: argparse.Namespace) -> int:
    """`predict`: simulate, print, and optionally record into the measured rows."""
    from generator.answers.published import qlora_ppm
    from generator.predict.parallel import default_workers
    from generator.predict.rows import predict_rows, record, render_json, render_text

    rows = tuple(under_allocators(list(parse_rows(args.rows, args.seq, None)), [args.allocator]))
    allocators = sorted({row.allocator for row in rows})
    if len(allocators) > 1:
        raise UsageError(f"predict takes one allocator at a time; the rows name {', '.join(allocators)}")
    source = resolved_model(args, rows)
    model = _process_model(args.measurements, allocators[0])
    predictions = predict_rows(rows, source, model, args.jobs or default_workers())
    ppm = qlora_ppm(args.measurements, "gpu")  # QLoRA's allowance on the GPU figures
    sys.stdout.write((render_json if args.format == "json" else render_text)(predictions, model, ppm))
    if args.record:
        written = record(predictions, source, args.measurements)
        print(f"recorded {len(written)} prediction(s) into {args.measurements}", file=sys.stderr)
    return EXIT_FAILED_ROWS if any(item.error for item in predictions) else 0


def run_fit(args: argparse.Namespace) -> int:
    """`fit`: answers for one budget, or --record curves: the site's, or with --model that model's."""
    from generator.answers.margin import validated_margin
    from generator.answers.published import qlora_ppm
    from generator.cli.confirm import confirm
    from generator.measure.environment import collect_environment
    from generator.predict.fit import Predictor, fit, recorded_curves
    from generator.predict.fit_report import render_json, render_text
    from generator.predict.parallel import default_workers

    workers = args.jobs or default_workers()
    if args.record and (args.gpus != 1 or args.sharding or args.budget is not None or args.with_tokens):
        raise UsageError("--record simulates the site's set-ups for every budget it lists; it takes no --budget, "
                         "--gpus, --sharding or --with")
    if args.record:
        from generator.cli.record import record_curves

        return record_curves(args, collect_environment(), _process_model(args.measurements, args.allocator), workers)
    model = _process_model(args.measurements, args.allocator, args.target)
    args.seq = args.seq or DEFAULT_SEQ_LEN
    if args.budget is None:
        raise UsageError("fit needs --budget (e.g. --budget 24GiB), or --record")
    if args.margin is not None and args.margin >= 1:
        raise UsageError(f"--margin {args.margin:.0%} keeps the whole budget free: give less than 100%")
    sharding = sharding_asked(args.gpus, args.sharding, args.target)
    if sharding is not None and args.confirm:
        raise UsageError("--confirm measures two real steps on this machine, which cannot run one card of several")
    if args.confirm and args.target != "cpu":
        raise UsageError("--confirm measures two real steps on this machine's CPU: give --target cpu with it")
    source = resolved_model(args, parse_rows([RowSpec(Mode.INFERENCE, 1, args.seq).id], args.seq, None))
    if args.margin is None:  # after the model is checked, so that bad input is refused in one line
        args.margin, why = validated_margin(args.measurements, args.allocator, args.target, collect_environment())
        print(f"margin {args.margin:.0%}: {why}", file=sys.stderr)
    ppm = qlora_ppm(args.measurements, args.target)
    curves = {} if args.simulate else recorded_curves(args.measurements, source, collect_environment())
    answers = fit(Predictor(source, model, target=args.target, sharding=sharding, qlora_ppm=ppm,
                            extra=args.with_tokens, curves=curves),
                  args.seq, args.budget, args.margin, kinds=kinds_here(), workers=workers)
    render = render_json if args.format == "json" else render_text
    sys.stdout.write(render(answers, source.name, args.budget, args.margin, model, args.target, sharding,
                            args.with_tokens))
    if args.confirm:
        sys.stdout.write(confirm(answers, source, args.measurements, args.budget))
    return EXIT_FAILED_ROWS if any(answer.error for answer in answers) else 0


COMMANDS = {"measure": run_measure, "probe": run_probe, "refresh": run_refresh, "build": run_build, "diff": run_diff,
            "predict": run_predict, "fit": run_fit, "history": run_history, "gpu": run_gpu, "published": run_published,
            "prune": run_prune}
