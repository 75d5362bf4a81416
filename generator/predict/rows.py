"""`predict`: each row's memory by simulation (generator/predict/simulate.py), with the net peak (beyond the
imports) this machine is expected to show on top of the tensors, modelled from the measured rows that carry predictions.

`--record` writes each prediction into the row's result file of this environment, in its own [prediction]
table, so that the page can set predicted beside measured."""

import json
from dataclasses import asdict, dataclass, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.answers.published import PPM, allowed, is_qlora
from generator.budget import ProcessModel
from generator.categories import CATEGORIES, WORDS, field
from generator.escaping import plain_terminal_text
from generator.matrix import Mode, RowSpec
from generator.measure.environment import collect_environment
from generator.model_source import ModelSource
from generator.predict import parallel
from generator.predict.fast.kept import kept_predictions
from generator.quantize import uses_bitsandbytes
from generator.store import catalog, codec, layout
from generator.store.records import Prediction, ResultsError
from generator.units import format_mib


@dataclass(frozen=True)
class RowPrediction:
    """A row, its simulation, and the net peak (beyond the imports) expected on this kind of machine."""

    row: RowSpec
    prediction: Prediction | None  # None: the row could not be simulated, and error says why
    peak_bytes: int = 0
    error: str = ""


def predict_rows(rows: tuple[RowSpec, ...], source: ModelSource, model: ProcessModel,
                 workers: int = 1) -> list[RowPrediction]:
    """Simulate each row (the baseline has nothing to simulate); a row that fails is kept with its reason. With
    several workers, each program's rows run side by side with the other's (simulate.py's two parts), in groups
    of the rows that differ only in their batch, so that each group's rows follow one another in one process
    and later batches take the fast path from earlier ones (batches.py, small_depths.py), as they do in order.
    Where every row's two parts are kept, they are read without simulating or importing torch (kept.py)."""
    simulated = [row for row in rows if row.mode != Mode.BASELINE]
    kept = kept_predictions(simulated, source)  # every part kept: answered without importing torch (kept.py)
    if kept is not None:
        return [RowPrediction(row, found, model.expected(found.tensor_peak_bytes))
                for row, found in zip(simulated, kept, strict=True)]
    from generator.predict.simulate import joined_or_reason  # the reference path: torch and transformers

    groups: dict[RowSpec, list[RowSpec]] = {}  # each row without its batch -> its rows, in the order asked
    for row in simulated:
        groups.setdefault(replace(row, batch_size=0), []).append(row)
    tasks = [(tuple(group), source, program) for program in ("cpu", "cuda") for group in groups.values()]
    parts: dict[tuple[RowSpec, str], Any] = {}
    for (group_rows, _, program), found in zip(tasks, parallel.starmap(_simulate_group, tasks, workers), strict=True):
        parts.update({(row, program): part for row, part in zip(group_rows, found, strict=True)})
    predictions = []
    for row in simulated:
        prediction, error = joined_or_reason(parts[(row, "cpu")], parts[(row, "cuda")])
        peak = model.expected(prediction.tensor_peak_bytes) if prediction else 0
        predictions.append(RowPrediction(row, prediction, peak, error))
    return predictions


def _simulate_group(rows: tuple[RowSpec, ...], source: ModelSource, program: str) -> list[Any]:
    """One program's part of each row, in order (a worker's task)."""
    from generator.predict.simulate import try_simulate_part

    return [try_simulate_part(row, source, program) for row in rows]


def record(predictions: list[RowPrediction], source: ModelSource, measurements: Path,
           environment_id: str | None = None) -> list[Path]:
    """Write each prediction into the measured file of its row, if there is one: this machine's CPU
    environment's, or the environment named (the GPU kit's, which simulates on the machine it measured)."""
    environment_id = environment_id or collect_environment().id
    folder = catalog.model_folder(measurements, environment_id, source.name, source.config_sha256)
    written = []
    for item in predictions:
        path = layout.row_path(folder, item.row)
        if item.prediction is None or not path.is_file():
            continue
        result = codec.load_file(path)
        if result.model.config_sha256 != source.config_sha256:
            raise ResultsError(f"{path}: measured another config of {source.name}; not recording into it")
        codec.save(replace(result, prediction=item.prediction), folder)
        written.append(path)
    return written


def render_text(predictions: list[RowPrediction], model: ProcessModel, qlora_ppm: int = PPM) -> str:
    """Three lines a row (four for a 4-bit one: its GPU figures with QLoRA's allowance, ``qlora_ppm`` per
    million), then the overhead model."""
    lines = []
    for item in predictions:
        p = item.prediction
        if p is None:
            lines.append(f"{item.row.id}: not simulated: {item.error}")
            continue
        lines.append(f"{item.row.id}: {format_mib(item.peak_bytes)} expected net peak (beyond the imports), "
                     f"set in {p.phase}; tensor peak {format_mib(p.tensor_peak_bytes)} ({p.seconds:.1f} s)")
        lines.append("  " + " · ".join(f"{WORDS[c]} {format_mib(getattr(p, field(c)))}" for c in CATEGORIES))
        lines.append(f"  on a GPU (simulated, not validated on a device): the caching allocator reserves "
                     f"{format_mib(p.cuda_reserved_bytes)}, or {format_mib(p.cuda_expandable_bytes)} with "
                     f"expandable segments, plus the CUDA context ({format_mib(CUDA_CONTEXT_BYTES)} allowed)")
        if p.cuda_host_bytes:
            lines.append(f"  and host memory on that GPU's machine, apart from the device's peak (offloaded "
                         f"activations, paged optimizer state; max_memory_allocated does not count it): "
                         f"{format_mib(p.cuda_host_bytes)} at most")
        lines += _bitsandbytes_lines(item.row, p, qlora_ppm)
    lines.append(model.describe())
    return "".join(plain_terminal_text(line) + "\n" for line in lines)


def _bitsandbytes_lines(row: RowSpec, p: Prediction, qlora_ppm: int) -> list[str]:
    """For a row that runs bitsandbytes, the version it was simulated under (another bitsandbytes is another
    program) and, for a 4-bit row, its GPU figures with QLoRA's allowance."""
    if not uses_bitsandbytes(row):
        return []
    program = f", with bitsandbytes {row.bitsandbytes}'s 4-bit matmul" if row.bitsandbytes else ""
    lines = [f"  simulated under bitsandbytes {_version('bitsandbytes')}{program}"]
    if is_qlora(row.id) and qlora_ppm != PPM:
        lines.append(f"  QLoRA on a GPU, with QLoRA's allowance (x{qlora_ppm / PPM:.3f}, from published QLoRA peaks): "
                     f"reserve {format_mib(allowed(p.cuda_reserved_bytes, qlora_ppm))}, or "
                     f"{format_mib(allowed(p.cuda_expandable_bytes, qlora_ppm))} with expandable segments")
    return lines


def _version(name: str) -> str:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def render_json(predictions: list[RowPrediction], model: ProcessModel, qlora_ppm: int = PPM) -> str:
    """One object per row; a 4-bit row's carries QLoRA's allowance on a GPU, per million."""
    rows = [{"row": item.row.id, "peak_bytes": item.peak_bytes, "error": item.error,
             **(asdict(item.prediction) if item.prediction else {}),
             **({"bitsandbytes": _version("bitsandbytes")} if uses_bitsandbytes(item.row) else {}),
             **({"qlora_allowance_ppm": qlora_ppm} if is_qlora(item.row.id) else {}),
             "process_model": model.describe()} for item in predictions]
    return json.dumps(rows, indent=2, sort_keys=True) + "\n"
