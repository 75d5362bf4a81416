"""`memory-budget history`: the default rows' tensor peaks under the transformers release installed here,
recorded into the model's history file. `nox -s history` runs it under each release in turn."""

import time

from generator.matrix import Mode, RowSpec
from generator.measure.environment import collect_environment
from generator.model_source import ModelSource
from generator.predict.simulate import try_simulate
from generator.store.history import ReleaseEntry, RowPeak


def record_release(rows: tuple[RowSpec, ...], source: ModelSource) -> ReleaseEntry:
    """Simulate each row under the libraries installed; a row that cannot run keeps its reason."""
    environment = collect_environment()
    started = time.perf_counter()
    peaks = []
    for row in rows:
        if row.mode == Mode.BASELINE:
            continue
        prediction, error = try_simulate(row, source)
        peaks.append(RowPeak(row=row.id, error=error) if prediction is None else RowPeak(
            row=row.id, tensor_peak_bytes=prediction.tensor_peak_bytes, weights_bytes=prediction.weights_bytes,
            gradients_bytes=prediction.gradients_bytes, optimizer_bytes=prediction.optimizer_bytes,
            activations_bytes=prediction.activations_bytes))
    return ReleaseEntry(transformers=environment.transformers, torch=environment.torch, peft=environment.peft,
                        seconds=round(time.perf_counter() - started, 1), rows=tuple(peaks))
