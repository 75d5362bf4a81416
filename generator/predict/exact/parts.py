"""A finished run's figures, as a program's part of a prediction: the CPU's tensor peak, its phase and split,
and each phase's peak; the GPU's tensor peak and the CUDA caching allocator's reserve replaying it; for a sharded
row one card's. ``simulate_exactly`` is the reference, end to end: the run (run.py, PyTorch's own FakeTensorMode,
full depth, every token) and its figures, which the fast path's must equal (tests/test_exact.py)."""

import time
from typing import Any

from generator.answers.cuda_allocator import replay
from generator.matrix import RowSpec
from generator.model_source import ModelSource
from generator.predict.exact.cuda_program import CPU, CUDA
from generator.predict.exact.run import ModelFacts, model_facts, run_fake
from generator.predict.exact.sharding import METHOD as SHARDING_METHOD
from generator.predict.exact.sharding import per_card
from generator.predict.exact.tracker import StorageTracker
from generator.store.records import CpuPart, CudaPart

FALLBACK_EXPERTS = "; experts through transformers' grouped_mm fallback op (same outputs; its fake kernel takes fp32)"
PROGRAMS = {"cpu": CPU, "cuda": CUDA}  # a part's name -> the program it simulates


def part(tracker: StorageTracker, facts: ModelFacts, rerouted: bool, row: RowSpec, program: str, method: str,
         seconds: float, expandable: bool = True) -> CpuPart | CudaPart:
    """A finished run's part ("cpu" or "cuda"), its method naming the experts' fallback and the sharding."""
    method += FALLBACK_EXPERTS if rerouted and facts.experts else ""
    if row.sharding:
        method += f"; one card's share under {row.sharding} on {row.gpus} cards ({SHARDING_METHOD})"
    if program == "cpu":
        return _cpu_part(tracker, facts, row, method, seconds)
    return _cuda_part(tracker, facts, row, method, seconds, expandable)


def simulate_exactly(row: RowSpec, source: ModelSource, program: str, method: str,
                     expandable: bool = True) -> CpuPart | CudaPart:
    """The reference's part: the row's steps run once, at full depth, with every new token, under PyTorch's own
    FakeTensorMode, and its figures."""
    started = time.perf_counter()
    tracker, prepared, rerouted = run_fake(row, source, PROGRAMS[program])
    return part(tracker, model_facts(prepared, row), rerouted, row, program, method, time.perf_counter() - started,
                expandable)


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


