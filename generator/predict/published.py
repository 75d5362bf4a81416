"""`published`: simulate every entry of the published-figures suite (generator/store/published.py) as the GPU's
program runs it, the same simulation `predict` prints as "GPU tensor peak", and record the answers in
measurements/_published/_predicted.toml for `build`, which imports no torch."""

from dataclasses import replace
from importlib import metadata

from generator.matrix import RowError, check_row, parse_row
from generator.model_source import ModelError, resolve_model
from generator.predict import parallel
from generator.predict.simulate import METHOD, try_simulate_part
from generator.store.published import Entry, Predicted, PredictedFile
from generator.store.records import CudaPart

LIBRARIES = ("torch", "transformers", "peft", "bitsandbytes")


def libraries() -> str:
    """The installed versions of the libraries the simulated programs run."""
    return ", ".join(f"{name} {metadata.version(name)}" for name in LIBRARIES)


def _simulate(entry: Entry) -> Predicted:
    """One entry's GPU program, or its one-line reason."""
    digest = entry.config_digest
    try:
        row = parse_row(entry.row)
        check_row(row, entry.row)
        source = resolve_model(str(entry.config))
    except (RowError, ModelError) as error:
        return Predicted(entry.id, entry.row, digest, 0, 0, str(error))
    targets = tuple(t for t in entry.lora_targets.split(",") if t)
    part, reason = try_simulate_part(row, replace(source, lora_targets=targets), "cuda", expandable=False)
    if not isinstance(part, CudaPart):
        return Predicted(entry.id, entry.row, digest, 0, 0, reason or "not simulated")
    return Predicted(entry.id, entry.row, digest, part.cuda_tensor_peak_bytes, part.cuda_reserved_bytes, "")


def simulate_suite(entries: list[Entry], workers: int = 1) -> PredictedFile:
    """Every entry's answer, side by side in ``workers`` processes; one that fails keeps its reason."""
    found = parallel.starmap(_simulate, [(entry,) for entry in entries], workers)
    return PredictedFile(libraries=libraries(), simulator=METHOD, entries=tuple(found))

