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
from typing import Any

from generator.answers.cuda_allocator import replay
from generator.escaping import one_line_error
from generator.matrix import RowSpec, batch_limit
from generator.model_source import ModelError, ModelSource
from generator.predict import batches
from generator.predict.cuda_program import CPU, CUDA
from generator.predict.fake_run import ModelFacts
from generator.predict.kept import METHOD, kept_part, simulation_key
from generator.predict.sharding import METHOD as SHARDING_METHOD
from generator.predict.sharding import per_card
from generator.predict.small_depths import WORTH_LAYERS, Simulated, shape_key, simulate_by_depth, simulate_full
from generator.predict.tracker import StorageTracker
from generator.store import simulations
from generator.store.records import CpuPart, CudaPart, Prediction, joined

FALLBACK_EXPERTS = "; experts through transformers' grouped_mm fallback op (same outputs; its fake kernel takes fp32)"

PROGRAMS = {"cpu": CPU, "cuda": CUDA}  # a part's name -> the program it simulates


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
    method = METHOD + (FALLBACK_EXPERTS if rerouted and facts.experts else "")
    if row.sharding:
        method += f"; one card's share under {row.sharding} on {row.gpus} cards ({SHARDING_METHOD})"
    seconds = time.perf_counter() - started
    if program == "cpu":
        return _cpu_part(tracker, facts, row, method, seconds)
    return _cuda_part(tracker, facts, row, method, seconds, expandable)


def simulate(row: RowSpec, source: ModelSource) -> Prediction:
    """The row's steps twice, as the CPU runs them and as a GPU runs them: the whole prediction."""
    return joined(simulate_part(row, source, "cpu"), simulate_part(row, source, "cuda"))  # type: ignore[arg-type]


def _card(tracker: StorageTracker, facts: ModelFacts, row: RowSpec,
          split: bool = True) -> tuple[int, str, dict, dict, list]:
    """The figures of a finished simulation: the whole run's, or for a sharded row one card's (sharding.py);
    without ``split`` (a GPU's part) the run's split and phase peaks are not read ({}), so a tracker replayed from
    its journal needs only its lean pass (tracker.py)."""
    if row.sharding:
        card = per_card(tracker, row, facts.whole)
        return card.peak, card.phase, card.split, card.phase_peaks, card.events
    if not split:
        return tracker.peak, tracker.peak_phase, {}, {}, tracker.events
    return tracker.peak, tracker.peak_phase, tracker.peak_split, tracker.phase_peaks, tracker.events


def _counts(facts: ModelFacts, method: str, seconds: float) -> dict[str, Any]:
    return {"parameters": facts.parameters, "trainable_parameters": facts.trainable, "method": method,
            "seconds": seconds, "lora_targets": facts.lora_targets, "quantization_bytes": facts.quantization_bytes}


def _cpu_part(tracker: StorageTracker, facts: ModelFacts, row: RowSpec, method: str, seconds: float) -> CpuPart:
    """The CPU program's figures: its tensor peak, the phase and split of it, and each phase's peak."""
    peak, phase, split, phases, _ = _card(tracker, facts, row)
    return CpuPart(tensor_peak_bytes=peak, phase=phase, weights_bytes=split["weights"],
                   gradients_bytes=split["gradients"], optimizer_bytes=split["optimizer"],
                   activations_bytes=split["activations"], phase_peak_bytes=dict(phases),
                   **_counts(facts, method, seconds))


def _cuda_part(tracker: StorageTracker, facts: ModelFacts, row: RowSpec, method: str, seconds: float,
               expandable: bool = True) -> CudaPart:
    """The GPU program's tensor peak and phase, and the caching allocator's reserve replaying it; with expandable
    segments too where asked (each replay of a deep model's trace walks a hundred thousand events)."""
    peak, phase, _, _, events = _card(tracker, facts, row, split=False)
    return CudaPart(cuda_tensor_peak_bytes=peak, cuda_phase=phase, cuda_reserved_bytes=replay(events).peak_reserved,
                    cuda_expandable_bytes=replay(events, expandable=True).peak_reserved if expandable else None,
                    cuda_host_bytes=tracker.host_peak, **_counts(facts, method, seconds))


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
