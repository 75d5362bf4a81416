"""`memory-budget gpu`: the GPU validation kit, for a machine with CUDA (`nox -s gpu`, or `python -m generator
gpu` where torch is already installed). In fresh processes it measures:

1. the context: what the card holds beside the caching allocator (generator/measure/gpu_context.py);
2. the GPU matrix: KIT_ROWS for each of KIT_MODELS, recording ``torch.cuda.max_memory_allocated`` and
   ``max_memory_reserved`` per row;
3. the fit page's own answers on a card (24 GiB unless --card says otherwise): each first-screen set-up at the
   batch the page answers, with the caching allocator capped at the card less the measured context. A row that
   runs confirms "fits"; one that runs out of memory refutes it.

Then it simulates each measured row on this machine's CPU, with this machine's library versions, and records
the prediction beside the measurement, so that `build` sets "simulated X, measured Y on <GPU>" side by side.
Everything lands in the measurements folder as a GPU environment, like any other."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

from generator.answers.setups import FIRST_SCREEN, KINDS
from generator.matrix import RowSpec, parse_row
from generator.units import GIB, format_mib, parse_size

KIT_MODELS = ("SmolLM2-135M-Instruct", "Qwen2-0.5B", "Llama-3.2-1B")
KIT_ROWS = ("infer-b8-s512-bf16", "gen-b8-s512-n32-bf16", "train-b4-s512", "train-b4-s512-amp",
            "train-b4-s512-ckpt", "train-b4-s512-bf16-lora8")
KIT_CARD = "24GiB"


def add_parser(commands: argparse._SubParsersAction, shared: dict) -> None:
    gpu = commands.add_parser(
        "gpu", help="the GPU validation kit: the context, a GPU matrix and the fit page's answers, measured",
        parents=[shared["measurements"]])
    gpu.add_argument("--card", type=parse_size, default=parse_size(KIT_CARD), metavar="SIZE",
                     help=f"the card whose fit answers are checked, under a cap on this one (default: {KIT_CARD})")
    gpu.add_argument("--models", nargs="+", default=list(KIT_MODELS), metavar="MODEL",
                     help=f"shipped configs to measure (default: {' '.join(KIT_MODELS)})")


def probe_context() -> dict:
    """The context probe, in a fresh process, as its JSON."""
    done = subprocess.run([sys.executable, "-m", "generator.measure.gpu_context"], capture_output=True, text=True,
                          timeout=300, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the context probe failed: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout)


def answer_rows(measurements: Path, model: str, card_bytes: int) -> list[RowSpec]:
    """The fit page's first-screen answers for one model on the card, as rows at their batch."""
    from generator.answers.fit import STATED_MARGIN
    from generator.predict.fast.kept import METHOD
    from generator.report.fit_page import Budget, site_answers
    from generator.store.fit_table import load_fit
    from generator.store.layout import fit_files

    budget = Budget(f"{card_bytes // GIB} GiB GPU", card_bytes, "gpu", STATED_MARGIN, "")
    tables = [table for path in fit_files(measurements) if (table := load_fit(path.parent)) is not None
              and table.simulator == METHOD]  # the curves the page shows: this simulator's
    if not tables:
        return []
    table = tables[0]
    answers = [answer for _, answer in site_answers(table, _no_process(), (budget,))
               if answer.model == model and answer.kind in FIRST_SCREEN and answer.batch > 0]
    return [parse_row(KINDS[a.kind].replace("{s}", str(table.seq_len)).format(b=a.batch)) for a in answers]


def _no_process():  # -> ProcessModel: a GPU's answer reads no CPU overhead
    from generator.budget import ProcessModel

    return ProcessModel(0.0, 0.0, 0, "")


def measure_all(args: argparse.Namespace, model: str, rows: list[RowSpec]) -> int:
    """One model's rows on the GPU, one fresh process each; the number that failed."""
    from generator.measure.matrix_run import MeasureRequest, measure_rows
    from generator.model_source import resolve_model

    report = measure_rows(MeasureRequest(rows=tuple(rows), model=resolve_model(model), output=args.measurements,
                                         device="cuda", repeats=1, repeats_explicit=True, force=True))
    return len(report.failed)


def run_gpu(args: argparse.Namespace) -> int:
    """The kit, start to end."""
    import torch

    from generator.cli.errors import UsageError
    from generator.measure.environment import collect_environment
    from generator.model_source import resolve_model
    from generator.store import gpu_context

    if not torch.cuda.is_available():
        raise UsageError("gpu needs a CUDA device, and torch sees none here")
    for model in args.models:  # a model that cannot be resolved is refused before anything runs
        resolve_model(model)
    folder = args.measurements / collect_environment("cuda").id
    folder.mkdir(parents=True, exist_ok=True)
    context = gpu_context.from_readings(probe_context(), "the context probe")
    print(f"gpu: context {format_mib(context.context_bytes)}, with cuBLAS's kernels and workspaces "
          f"{format_mib(context.context_with_kernels_bytes)} -> {gpu_context.save(context, folder)}", file=sys.stderr)
    cap = args.card - max(context.context_with_kernels_bytes, context.context_bytes, 0)
    failed, measured = 0, []
    for model in args.models:
        rows = [parse_row(row) for row in KIT_ROWS]
        rows += [row.with_limit(cap) for row in answer_rows(args.measurements, model, args.card)]
        failed += measure_all(args, model, rows)
        measured += [(model, row) for row in rows]
    record_predictions(args.measurements, measured, folder.name)
    return 1 if failed else 0


def record_predictions(measurements: Path, measured: list[tuple[str, RowSpec]], environment: str) -> None:
    """Simulate every measured row here, side by side on this machine's cores, with its library versions, and
    record each beside its GPU measurement (a capped row gets its uncapped row's simulation)."""
    from generator.model_source import resolve_model
    from generator.predict.parallel import default_workers, starmap
    from generator.predict.rows import RowPrediction, record
    from generator.predict.simulate import try_simulate

    tasks = list(dict.fromkeys((model, row.with_limit(0)) for model, row in measured))
    found = dict(zip(tasks, starmap(try_simulate, [(row, resolve_model(model)) for model, row in tasks],
                                    default_workers()), strict=True))
    for model in dict.fromkeys(model for model, _ in measured):
        predictions = [RowPrediction(row, prediction=found[(model, row.with_limit(0))][0],
                                     error=found[(model, row.with_limit(0))][1]) for name, row in measured
                       if name == model]
        written = record(predictions, resolve_model(model), measurements, environment)
        print(f"gpu: recorded {len(written)} prediction(s) for {model}", file=sys.stderr)
