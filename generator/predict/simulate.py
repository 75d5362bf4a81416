"""Simulate a row's tensor memory with fake tensors: the same steps as the worker (generator/steps.py), on a
model built under PyTorch's FakeTensorMode, so no weight is allocated and no arithmetic is done.

The FakeTensorMode sees every tensor an operator returns and follows each new storage until it is freed
(a weakref finalizer), so it knows the bytes of live tensor storage at every moment: the tensor peak, the
phase that sets it, and how the peak splits into weights, gradients, AdamW state and activations and
temporaries. Gradients are recognised as they are accumulated, AdamW's moments once a step has made them;
buffers, the token batch and AdamW's scalar step counters count with activations and temporaries."""

import contextlib
import gc
import time
from collections.abc import Iterator
from dataclasses import replace

from generator.escaping import one_line_error
from generator.matrix import RowSpec, batch_limit
from generator.model_source import ModelError, ModelSource
from generator.predict.exact.parts import PROGRAMS, part
from generator.predict.fast import batches
from generator.predict.fast.kept import METHOD, kept_part, simulation_key
from generator.predict.fast.small_depths import WORTH_LAYERS, Simulated, shape_key, simulate_by_depth, simulate_full
from generator.store import simulations
from generator.store.records import CpuPart, CudaPart, Prediction, joined


def simulate_part(row: RowSpec, source: ModelSource, program: str, expandable: bool = True) -> CpuPart | CudaPart:
    """The row's steps as one program runs them ("cpu": the tensor peak and its split, the CPU's figures;
    "cuda": the GPU's tensor peak, replayed through the caching allocator's rules, with expandable segments too
    where ``expandable``); by depth where the stack's trace repeats, else at full depth; the figures are the
    same."""
    with collector_paused():
        return _simulate_part(row, source, program, expandable)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic collector paused while a part is simulated: its passes over the runs' objects and the
    journals (tuples by the hundred thousand) took a tenth of the time. A run's storages are freed by their last
    reference going, as its journal records them: the journals are the same, entry for entry, with the collector
    on or off, on every architecture, set-up and program (tests/test_fake_mode.py). What cycles a part leaves are
    collected after it."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def _simulate_part(row: RowSpec, source: ModelSource, program: str, expandable: bool) -> CpuPart | CudaPart:
    started = time.perf_counter()
    chosen = PROGRAMS[program]

    def at_batch(batch: int) -> Simulated:
        other = replace(row, batch_size=batch)
        return simulate_by_depth(other, source, chosen, WORTH_LAYERS) or simulate_full(other, source, chosen)

    tracker, facts, rerouted = batches.along(shape_key(row, source, chosen), row.batch_size,
                                             batch_limit(row.seq_len), at_batch)
    return part(tracker, facts, rerouted, row, program, METHOD, time.perf_counter() - started, expandable)


def simulate(row: RowSpec, source: ModelSource) -> Prediction:
    """The row's steps twice, as the CPU runs them and as a GPU runs them: the whole prediction."""
    return joined(simulate_part(row, source, "cpu"), simulate_part(row, source, "cuda"))  # type: ignore[arg-type]


def simulate_kept_part(row: RowSpec, source: ModelSource, program: str, expandable: bool = True) -> CpuPart | CudaPart:
    """simulate_part, or the same part kept on disk from an earlier run (generator/store/simulations.py); a
    CUDA part kept without the expandable reserve serves only a question that does not ask for it, and is
    simulated again, and kept whole, for one that does."""
    if simulations.cache_root() is None:  # nothing is kept: no key to make (the code's hash reads every module)
        return simulate_part(row, source, program, expandable)
    found = kept_part(row, source, program, expandable)
    if found is None:
        found = simulate_part(row, source, program, expandable)
        simulations.save(simulation_key(row, source, program), found)
    return found


def simulate_kept(row: RowSpec, source: ModelSource) -> Prediction:
    """simulate, from its two parts, each simulated or kept."""
    return joined(simulate_kept_part(row, source, "cpu"), simulate_kept_part(row, source, "cuda"))  # type: ignore


def try_simulate_part(row: RowSpec, source: ModelSource, program: str,
                      expandable: bool = True) -> tuple[CpuPart | CudaPart | None, str]:
    """simulate_kept_part, with a row that cannot run (no LoRA targets, an operator the fake tensors cannot
    take) as that row's one-line reason, so the other rows still print. A config that cannot be built at all is
    the model's fault, not the row's: ModelError goes on to the command line as bad input."""
    try:
        return simulate_kept_part(row, source, program, expandable), ""
    except ModelError:
        raise
    except Exception as error:  # torch, transformers and peft fail with exceptions of many types
        return None, one_line_error(error)


def joined_or_reason(cpu: tuple[CpuPart | CudaPart | None, str],
                     cuda: tuple[CpuPart | CudaPart | None, str]) -> tuple[Prediction | None, str]:
    """A row's prediction from its two parts as try_simulate_part gave them, or the first part's reason."""
    if cpu[0] is None or cuda[0] is None:
        return None, cpu[1] or cuda[1]
    return joined(cpu[0], cuda[0]), ""  # type: ignore[arg-type]


def try_parts(row: RowSpec, source: ModelSource,
              expandable: bool = True) -> tuple[tuple[CpuPart, CudaPart] | None, str]:
    """The row's two parts (try_simulate_part), or its one-line reason: the CPU's program first, and the GPU's
    only where the CPU's ran (with the expandable reserve where ``expandable``)."""
    cpu = try_simulate_part(row, source, "cpu")
    if cpu[0] is None:
        return None, cpu[1]
    cuda = try_simulate_part(row, source, "cuda", expandable)
    return (None, cuda[1]) if cuda[0] is None else ((cpu[0], cuda[0]), "")  # type: ignore[return-value]


def try_simulate(row: RowSpec, source: ModelSource) -> tuple[Prediction | None, str]:
    """simulate_kept, or the row's one-line reason (try_parts)."""
    parts, error = try_parts(row, source)
    return (None, error) if parts is None else (joined(*parts), "")
