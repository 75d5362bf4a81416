"""The argument parser of every command. Options that several commands share come from parent parsers, so
they are spelled, typed and documented once; parsing turns text into typed values and nothing more."""

import argparse
import re
from pathlib import Path

from generator.answers.setups import WITH_TOKENS
from generator.cli.errors import UsageError
from generator.cli.gpu_kit import add_parser as _gpu
from generator.cli.prune import add_parser as _prune
from generator.cli.published import add_parser as _published
from generator.diff.compare import parse_threshold
from generator.matrix import (
    ALLOCATORS,
    DEFAULT_ALLOCATOR,
    DEFAULT_ROWS,
    DEFAULT_SEQ_LEN,
    DEFAULT_TIMEOUT_SECONDS,
    SHARDED_KINDS,
)
from generator.model_source import DEFAULT_MODEL, SHIPPED_MODELS
from generator.units import parse_size

DESCRIPTION = ("memory-budget: measure the peak memory of a language model in inference and training, simulate "
               "it for any config, diff it between library versions, and build the write-up from the results.")


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        if message.endswith("expected one argument"):  # argparse reads "--budget -5GiB" as two options
            message += " (a value that starts with '-' goes after '=', as in --budget=-5GiB)"
        raise UsageError(message)


def positive_int(text: str) -> int:
    """A whole number above zero."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be above zero: {text!r}")
    return value


def positive_seconds(text: str) -> float:
    """A number of seconds above zero."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if not 0 < value < 10**7:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds: {text!r}")
    return value


def size(text: str) -> int:
    """A size such as 3GiB; a bare number is refused with a hint."""
    try:
        return parse_size(text, require_unit=True)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def module_names(text: str) -> tuple[str, ...]:
    """'q_proj,v_proj': module names, as peft's target_modules takes them."""
    names = tuple(name for name in re.split(r"[,\s]+", text.strip()) if name)
    if not names or not all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]*", name) for name in names):
        raise argparse.ArgumentTypeError(f"not a list of module names: {text!r} (try q_proj,v_proj)")
    return names


def with_tokens(text: str) -> tuple[str, ...]:
    """'flce,offload': row tokens `fit --with` adds to each training set-up, each one of WITH_TOKENS, once."""
    tokens = tuple(token for token in re.split(r"[,\s]+", text.strip()) if token)
    wrong = [token for token in tokens if token not in WITH_TOKENS]
    if not tokens or wrong or len(set(tokens)) != len(tokens):
        raise argparse.ArgumentTypeError(f"not a list of distinct tokens of {', '.join(WITH_TOKENS)}: {text!r}")
    return tokens


def percentage(text: str) -> float:
    """A percentage such as 2%, as a fraction."""
    try:
        return parse_threshold(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _parents() -> dict[str, argparse.ArgumentParser]:
    """One parent parser per shared option."""
    model = _Parser(add_help=False)
    model.add_argument("--model", help=f"a shipped config ({', '.join(SHIPPED_MODELS)}), a config.json, a local "
                       f"folder, or a hub id (default: {DEFAULT_MODEL}'s config with random weights)")
    seq = _Parser(add_help=False)
    seq.add_argument("--seq", type=positive_int, default=DEFAULT_SEQ_LEN,
                     help="sequence length of rows that do not name one (default: %(default)s)")
    device = _Parser(add_help=False)
    device.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where the worker runs the row (default: %(default)s)")
    timeout = _Parser(add_help=False)
    timeout.add_argument("--timeout", type=positive_seconds, default=DEFAULT_TIMEOUT_SECONDS,
                         help="seconds before a row's worker is stopped (default: %(default)s)")
    measurements = _Parser(add_help=False)
    measurements.add_argument("--measurements", type=Path, default=Path("measurements"),
                              help="measurements folder (default: %(default)s)")
    lora = _Parser(add_help=False)
    lora.add_argument("--lora-targets", type=module_names, metavar="MODULES",
                      help="modules a LoRA row adapts, e.g. qkv_proj or q_proj,v_proj (default: peft's for the "
                      "architecture, or this tool's where peft names none)")
    return {"model": model, "seq": seq, "device": device, "timeout": timeout, "measurements": measurements,
            "lora": lora}


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("memory-budget")
    except PackageNotFoundError:  # a checkout run as `python -m generator` without installing it
        return "(not installed)"


def build_parser() -> argparse.ArgumentParser:
    """The argument parser for every subcommand."""
    parser = _Parser(prog="memory-budget", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"memory-budget {_version()}")
    commands = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    shared = _parents()
    for add in (_measure, _probe, _refresh, _build, _predict, _fit, _diff, _history, _gpu, _published, _prune):
        add(commands, shared)
    return parser


def _measure(commands: argparse._SubParsersAction, shared: dict) -> None:
    measure = commands.add_parser("measure", help="run the measurement matrix; one TOML file per row",
                                  parents=[shared[name] for name in ("model", "seq", "lora", "device", "timeout")])
    measure.add_argument("--rows", nargs="+", metavar="ROW",
                         help=f"rows to run (default: {' '.join(DEFAULT_ROWS)}); commas also separate")
    measure.add_argument("--output", type=Path, default=Path("measurements"),
                         help="measurements folder (default: %(default)s)")
    measure.add_argument("--repeats", type=positive_int,
                         help="repeat rounds, each from a fresh worker server; a row's figure is the median "
                         "(default: 3, and 1 for a row whose first repeat took over 5 minutes)")
    measure.add_argument("--force", action="store_true", help="measure rows already on disk again")
    measure.add_argument("--allocator", nargs="+", choices=ALLOCATORS, metavar="NAME",
                         help=f"measure each row under each of these allocators ({', '.join(ALLOCATORS)}; default: "
                         f"{DEFAULT_ALLOCATOR}, what a user's process gets); a row id may also end in one")
    measure.add_argument("--memory-limit", type=size, metavar="SIZE",
                         help="cap each worker, e.g. 3GiB (cgroup v2 where possible, else RLIMIT_DATA)")
    _cluster_options(measure)


def _cluster_options(measure: argparse.ArgumentParser) -> None:
    cluster = measure.add_argument_group(
        "executors", "where the repeats run: in rounds in this process (the default), or one submitit job each; "
        "Slurm options may also come from [slurm] in <measurements>/_slurm.toml")
    cluster.add_argument("--executor", choices=("rounds", "local", "slurm", "debug"), default="rounds",
                         help="rounds (default), local (submitit jobs on this machine, one at a time), slurm (a "
                         "job array), debug (submitit jobs in this process)")
    cluster.add_argument("--slurm-partition", dest="partition", help="Slurm partition")
    cluster.add_argument("--slurm-time", dest="time_minutes", type=positive_int, metavar="MINUTES",
                         help="each job's time limit in minutes (default: 60); also the local executor's")
    cluster.add_argument("--slurm-mem", dest="memory", metavar="SIZE", help="Slurm --mem per job, e.g. 64G")
    cluster.add_argument("--slurm-gpus", dest="gpus", type=positive_int, help="GPUs per job")
    cluster.add_argument("--slurm-array-parallelism", dest="array_parallelism", type=positive_int, metavar="N",
                         help="at most N jobs of the array at once (default: 16)")
    cluster.add_argument("--slurm-account", dest="account", help="the account a cluster bills")


def _allocator(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--allocator", choices=ALLOCATORS, default=DEFAULT_ALLOCATOR, metavar="NAME",
                        help=f"{what}: {', '.join(ALLOCATORS)} (default: %(default)s)")


def _probe(commands: argparse._SubParsersAction, shared: dict) -> None:
    probe = commands.add_parser("probe", help="run one row under a memory cap and show the phase where it dies",
                                parents=[shared[name] for name in ("model", "seq", "lora", "device", "timeout")])
    probe.add_argument("--row", default="train-b8", help="the row to probe (default: %(default)s)")
    _allocator(probe, "the allocator the row runs under")
    probe.add_argument("--memory-limit", type=size, metavar="SIZE",
                       help="the cap (default: midway between the row's measured step-1 and step-2 peaks)")
    probe.add_argument("--output", type=Path, default=Path("measurements"),
                       help="measurements folder: where the uncapped row is read and the capped row written")


def _refresh(commands: argparse._SubParsersAction, shared: dict) -> None:
    refresh = commands.add_parser(
        "refresh", help="after measure: record predictions, probe the step-2 cap and simulate the fit curves, "
        "each skipped where current", parents=[shared[name] for name in ("model", "seq", "measurements")])
    refresh.set_defaults(lora_targets=None)


def _build(commands: argparse._SubParsersAction, shared: dict) -> None:
    build = commands.add_parser("build", help="turn a measurements folder into site/index.md and index.html",
                                parents=[shared["measurements"]])
    build.add_argument("--env", help="environment to build the article from (default: the newest library versions)")
    build.add_argument("--model", help="the model whose rows to show (default: the shipped model, or the only one)")
    build.add_argument("--output", type=Path, default=Path("site"), help="output folder (default: %(default)s); "
                       "refused where it holds files no build wrote, except CNAME, .nojekyll and the paths listed "
                       "in its .memory-budget-keep")
    build.add_argument("--force", action="store_true",
                       help="replace an output folder that holds files no build wrote (never the measurements)")


def _predict(commands: argparse._SubParsersAction, shared: dict) -> None:
    predict = commands.add_parser("predict", help="simulate rows with fake tensors: peak, phase and split",
                                  parents=[shared[name] for name in ("model", "seq", "lora", "measurements")])
    predict.add_argument("--rows", nargs="+", metavar="ROW", help="as for measure (default: the default matrix)")
    predict.add_argument("--format", choices=("text", "json"), default="text")
    _allocator(predict, "the allocator whose measured overhead the expected net peak adds")
    predict.add_argument("--record", action="store_true",
                         help="write each prediction into this environment's measured file of its row")
    predict.add_argument("--jobs", type=positive_int, metavar="N",
                         help="simulations run side by side, one process each (default: this machine's cores); "
                         "the figures are the same for any N")


def _fit(commands: argparse._SubParsersAction, shared: dict) -> None:
    fit = commands.add_parser("fit", help="the largest batch that fits a budget, by simulation",
                              parents=[shared[name] for name in ("model", "lora", "measurements")])
    fit.add_argument("--seq", type=positive_int, default=None,
                     help=f"sequence length (default: {DEFAULT_SEQ_LEN}; with --model and --record, each length the "
                     "fit page's calculator offers that the model's positions allow)")
    fit.add_argument("--budget", type=size, metavar="SIZE", help="the memory to fit in, e.g. 24GiB")
    _allocator(fit, "the allocator whose measured overhead the answers add")
    fit.add_argument("--target", choices=("cpu", "gpu", "gpu-expandable"), default="gpu",
                     help="where the budget is: gpu (the CUDA caching allocator, simulated, plus a context "
                     "allowance; the default), gpu-expandable (the same with expandable segments), cpu (the "
                     "measured process overhead: this machine's rows, else borrowed, and said so, from an "
                     "environment with the same library versions)")
    fit.add_argument("--margin", type=percentage, metavar="PERCENT",
                     help="kept free for what the simulation does not see (default: on a CPU the band this "
                     "machine's out-of-sample errors support under --allocator, else 10%%)")
    fit.add_argument("--gpus", type=positive_int, metavar="N", default=1,
                     help="data-parallel GPUs sharing each training set-up's state; each card's answer is its own "
                          "batch (default: 1)")
    fit.add_argument("--sharding", choices=tuple(SHARDED_KINDS), default=None,
                     help="what the GPUs shard: ddp nothing, zero1 the optimizer state, zero2 also the gradients, "
                          "zero3 and fsdp also the weights (default with --gpus: fsdp)")
    fit.add_argument("--with", dest="with_tokens", type=with_tokens, metavar="TOKENS", default=(),
                     help="row tokens added to every training set-up, in place of its own for the same coordinate: "
                          f"{', '.join(WITH_TOKENS)} (e.g. --with flce,offload)")
    fit.add_argument("--format", choices=("text", "json"), default="text")
    fit.add_argument("--jobs", type=positive_int, metavar="N",
                     help="simulations run side by side, one process each (default: this machine's cores); "
                     "the answers are the same for any N")
    fit.add_argument("--simulate", action="store_true",
                     help="simulate every batch the search asks, even where a curve recorded under these library "
                     "versions (the site's, or one of --record's) covers the budget and answers as the fit page does")
    fit.add_argument("--confirm", action="store_true",
                     help="with --target cpu: measure two real steps at each answer and at the next batch, where "
                     "they fit this machine")
    fit.add_argument("--record", action="store_true",
                     help="instead: simulate every shipped config's tensor-peak curves into this environment's "
                     "_fit.toml, from which the site answers every card it lists; with --model, that model's "
                     "curves into _curves/, which the next build offers in the fit page's calculator")


def _diff(commands: argparse._SubParsersAction, shared: dict) -> None:
    diff = commands.add_parser("diff", help="compare one model's rows between two environments",
                               parents=[shared["measurements"]])
    diff.add_argument("before", help="environment folder, or an environment id under --measurements")
    diff.add_argument("after", help="environment folder, or an environment id under --measurements")
    diff.add_argument("--model", help="the model whose rows to compare (default: as for build)")
    diff.add_argument("--threshold", type=percentage, metavar="PERCENT",
                      help="call a change real beyond this, e.g. 2%% (default: each row's noise, at least the floor)")
    diff.add_argument("--format", choices=("text", "md", "json"), default="text",
                      help="text (an aligned table), md (for a pull request) or json (default: %(default)s)")


def _history(commands: argparse._SubParsersAction, shared: dict) -> None:
    history = commands.add_parser(
        "history", help="simulate the rows under the transformers release installed here, into "
        "<measurements>/_history/<model>.toml (`nox -s history` runs it under each release)",
        parents=[shared[name] for name in ("model", "seq", "measurements")])
    history.add_argument("--rows", nargs="+", metavar="ROW", help="as for measure (default: the default matrix)")
    history.add_argument("--not-installable", metavar="VERSION:REASON",
                         help="record that a release could not be installed, instead of simulating")
    history.set_defaults(lora_targets=None)
