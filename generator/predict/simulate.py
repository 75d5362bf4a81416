"""Simulate a row's tensor memory with fake tensors: the same steps as the worker (generator/steps.py), on a
model built under PyTorch's FakeTensorMode, so no weight is allocated and no arithmetic is done.

A dispatch mode sees every tensor an operator returns and follows each new storage until it is freed
(a weakref finalizer), so it knows the bytes of live tensor storage at every moment: the tensor peak, the
phase that sets it, and how the peak splits into weights, gradients, AdamW state and activations and
temporaries. Gradients are recognised as they are accumulated, AdamW's moments once a step has made them;
buffers, the token batch and AdamW's scalar step counters count with activations and temporaries."""

import contextlib
import time
import weakref
from typing import Any

from generator.answers.cuda_allocator import replay
from generator.escaping import one_line_error
from generator.matrix import RowSpec
from generator.measure.method import code_hash
from generator.model_source import ModelError, ModelSource, dtype_argument, load_config
from generator.predict.cuda_program import CPU, CUDA, Program, cuda_autocast, cuda_sdpa_mode
from generator.predict.fake_friendly import experts_fake_friendly, modules_stay_put, sequences_unpacked
from generator.predict.sharding import METHOD as SHARDING_METHOD
from generator.predict.sharding import per_card, share, whole_units
from generator.quantize import (
    bitsandbytes_cpu_updates,
    bitsandbytes_fake_friendly,
    import_bitsandbytes,
    parameter_count,
    quantization_tensors,
    uses_bitsandbytes,
)
from generator.steps import Prepared, prepare, run_steps
from generator.store import simulations
from generator.store.records import Prediction
from generator.store.simulations import SimulationKey

CATEGORIES = ("weights", "gradients", "optimizer", "activations")
# The simulator's method, recorded with each prediction and fit table; refresh simulates again what an older one
# made. "the real run's mask path": since sequences_unpacked (before it, GQA models were overcounted).
# "generate()'s last-position logits": since generation keeps one position of the prompt's logits, as generate()
# does (before it, every prompt position's logits were kept, 2.6x too cautious for a large vocabulary).
# "CUDA's program for GPU figures": since the GPU reserve replays a simulation of what CUDA runs (its SDPA backend,
# its autocast lists, bitsandbytes' fused update); before it, the CPU's program stood in for it.
METHOD = ("FakeTensorMode, live tensor storages, the real run's mask path, generate()'s last-position logits, "
          "CUDA's program for GPU figures")
# the modules whose code decides a simulation's figures: a kept simulation made by other code is not used
SIMULATOR_MODULES = ("generator.predict.simulate", "generator.answers.cuda_allocator", "generator.steps",
                     "generator.predict.fake_friendly", "generator.predict.cuda_program",
                     "generator.model_source", "generator.quantize", "generator.predict.sharding")
FALLBACK_EXPERTS = "; experts through transformers' grouped_mm fallback op (same outputs; its fake kernel takes fp32)"


class StorageTracker:
    """Bytes of live tensor storage, by category and phase. Its dispatch mode is made by ``mode()``."""

    def __init__(self) -> None:
        self.sizes: dict[int, int] = {}
        self.kinds: dict[int, str] = {}
        self.totals = dict.fromkeys(CATEGORIES, 0)
        self.total = self.peak = self.phase_max = 0
        self.peak_split = dict(self.totals)
        self.phase = self.peak_phase = "load"
        self.phase_peaks: dict[str, int] = {}
        self.events: list[tuple[object, int, bool]] = []  # (storage, bytes, made or freed), for allocator models
        self.event_kinds: dict[int, str] = {}  # a made event's index -> what its storage turned out to be
        self.made_at: dict[int, int] = {}  # a live storage -> the index of its made event
        self.phase_marks: list[tuple[int, str]] = []  # (index of the next event, phase entered), for replays

    def track(self, tensor: Any, kind: str = "activations") -> None:
        """Count a tensor's storage once, from now until it is freed."""
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self.sizes:
            return
        self.sizes[key], self.kinds[key] = storage.nbytes(), kind
        self.made_at[key], self.event_kinds[len(self.events)] = len(self.events), kind
        self.events.append((key, self.sizes[key], True))
        self.totals[kind] += self.sizes[key]
        self.total += self.sizes[key]
        weakref.finalize(storage, self._free, key)
        if self.total > self.phase_max:
            self.phase_max = self.total
        if self.total > self.peak:
            self.peak, self.peak_split, self.peak_phase = self.total, dict(self.totals), self.phase

    def classify(self, tensor: Any, kind: str) -> None:
        """Say what a live tensor is (a gradient, optimizer state, a weight)."""
        self.track(tensor, kind)
        key = id(tensor.untyped_storage())
        self.totals[self.kinds[key]] -= self.sizes[key]
        self.kinds[key] = self.event_kinds[self.made_at[key]] = kind
        self.totals[kind] += self.sizes[key]

    def _free(self, key: int) -> None:
        size = self.sizes.pop(key)
        del self.made_at[key]
        self.events.append((key, size, False))
        self.totals[self.kinds.pop(key)] -= size
        self.total -= size

    def enter(self, phase: str) -> None:
        """The phase callback of generator/steps.py: close the phase that ended, start the next."""
        self.phase_peaks[self.phase] = self.phase_max
        self.phase, self.phase_max = phase, self.total
        self.phase_marks.append((len(self.events), phase))

    def finish(self) -> None:
        """Close the last phase."""
        self.phase_peaks[self.phase] = self.phase_max

    def mode(self) -> Any:
        """A TorchDispatchMode that tracks the storage of every tensor an operator returns."""
        from torch.utils._python_dispatch import TorchDispatchMode
        from torch.utils._pytree import tree_leaves

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                for leaf in tree_leaves(out):
                    if hasattr(leaf, "untyped_storage"):
                        tracker.track(leaf)
                return out

        return _Mode()


def _watch(tracker: StorageTracker, prepared: Prepared) -> None:
    """Count what exists before the steps, and learn gradients and optimizer state as they appear."""
    model = prepared.model
    for tensor in [*model.parameters(), *quantization_tensors(model)]:  # a 4-bit base's scales are its weights
        tracker.classify(tensor, "weights")
    for tensor in [*model.buffers(), prepared.batch]:  # rotary tables, masks, the tokens: the rest
        tracker.track(tensor)
    for parameter in model.parameters():
        if parameter.requires_grad:
            parameter.register_post_accumulate_grad_hook(lambda p: tracker.classify(p.grad, "gradients"))
    if prepared.optimizer is not None:
        def state_made(optimizer: Any, *_: Any) -> None:
            for state in optimizer.state.values():
                for value in state.values():  # the two moments; the scalar step counters stay in the rest
                    if hasattr(value, "untyped_storage") and value.dim() > 0:
                        tracker.classify(value, "optimizer")
        prepared.optimizer.register_step_post_hook(state_made)


def _has_experts(model: Any) -> bool:
    return any(hasattr(module, "num_experts") for module in model.modules())


def _run(row: RowSpec, source: ModelSource, program: Program) -> tuple[StorageTracker, Prepared, bool]:
    """Build the model from its config under FakeTensorMode and run the row's steps as the program runs them
    (generator/predict/cuda_program.py), tracking storages. Returns the tracker, the prepared row, and whether
    the experts went through transformers' fallback op."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoModelForCausalLM

    tracker, fake = StorageTracker(), FakeTensorMode()
    with fake, modules_stay_put(), bitsandbytes_fake_friendly(row, fake):
        try:
            model = AutoModelForCausalLM.from_config(load_config(source),
                                                     **{dtype_argument(): getattr(torch, row.dtype)})
        except Exception as error:  # whatever transformers raises for a config it cannot build, as one line
            raise ModelError(f"--model {source.reference}: transformers cannot build it from its config "
                             f"({one_line_error(error)})") from None
        model.tie_weights()
        prepared = prepare(model, row, lora_targets=source.lora_targets)
    prepared.autocast = cuda_autocast if program.autocast else None
    with (fake, contextlib.nullcontext() if program.fused_update else bitsandbytes_cpu_updates(row), tracker.mode(),
          experts_fake_friendly(row.dtype) as rerouted, sequences_unpacked(), bitsandbytes_fake_friendly(row, fake),
          cuda_sdpa_mode() if program.sdpa else contextlib.nullcontext()):
        _watch(tracker, prepared)
        run_steps(row, prepared, tracker.enter)
    tracker.finish()
    return tracker, prepared, rerouted


def simulate(row: RowSpec, source: ModelSource) -> Prediction:
    """The row's steps twice: as the CPU runs them (the tensor peak and its split, the CPU's figures) and as a
    GPU runs them (the CUDA program's tensor peak, replayed through the caching allocator's rules)."""
    started = time.perf_counter()
    tracker, prepared, rerouted = _run(row, source, CPU)
    on_gpu, _, _ = _run(row, source, CUDA)
    method = METHOD + (FALLBACK_EXPERTS if rerouted and _has_experts(prepared.model) else "")
    return _prediction(tracker, on_gpu, prepared, row, method, time.perf_counter() - started)


def _card(tracker: StorageTracker, prepared: Prepared, row: RowSpec) -> tuple[int, str, dict, dict, list]:
    """The figures of a finished simulation: the whole run's, or for a sharded row one card's (sharding.py)."""
    if row.sharding:
        card = per_card(tracker, row, whole_units(prepared.model, row))
        return card.peak, card.phase, card.split, card.phase_peaks, card.events
    return tracker.peak, tracker.peak_phase, tracker.peak_split, tracker.phase_peaks, tracker.events


def _prediction(tracker: StorageTracker, on_gpu: StorageTracker, prepared: Prepared, row: RowSpec, method: str,
                seconds: float) -> Prediction:
    """The CPU program's figures, and the GPU program's tensor peak and simulated reserves."""
    peak, phase, split, phases, _ = _card(tracker, prepared, row)
    gpu_peak, gpu_phase, _, _, gpu_events = _card(on_gpu, prepared, row)
    if row.sharding:
        method += f"; one card's share under {row.sharding} on {row.gpus} cards ({SHARDING_METHOD})"
    parameters = list(prepared.model.parameters())
    return Prediction(
        cuda_reserved_bytes=replay(gpu_events).peak_reserved,
        cuda_expandable_bytes=replay(gpu_events, expandable=True).peak_reserved,
        cuda_tensor_peak_bytes=gpu_peak, cuda_phase=gpu_phase,
        tensor_peak_bytes=peak, phase=phase, weights_bytes=split["weights"],
        gradients_bytes=split["gradients"], optimizer_bytes=split["optimizer"],
        activations_bytes=split["activations"], phase_peak_bytes=dict(phases),
        parameters=sum(parameter_count(p) for p in parameters),
        trainable_parameters=sum(p.numel() for p in parameters if p.requires_grad),
        lora_targets=" ".join(prepared.lora_targets), method=method, seconds=seconds,
        quantization_bytes=sum(share(size, "weights", row) for size in {
            id(t.untyped_storage()): t.untyped_storage().nbytes() for t in quantization_tensors(prepared.model)
        }.values()))


def simulation_key(row: RowSpec, source: ModelSource) -> SimulationKey:
    """What a kept simulation of this row is filed under: the config, the row, the LoRA targets, the library
    versions and the simulator (its method and the hash of its code, so an edit is never served stale)."""
    import peft
    import torch
    import transformers

    libraries = f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}"
    if uses_bitsandbytes(row):
        libraries += f", bitsandbytes {import_bitsandbytes().__version__}"
    return SimulationKey(config_sha256=source.config_sha256, row=row.id, lora_targets=" ".join(source.lora_targets),
                         libraries=libraries,
                         simulator=f"{METHOD}; code {code_hash(SIMULATOR_MODULES)}")


def simulate_kept(row: RowSpec, source: ModelSource) -> Prediction:
    """simulate, or the same simulation kept on disk from an earlier run (generator/store/simulations.py)."""
    key = simulation_key(row, source)
    found = simulations.load(key)
    if found is None:
        found = simulate(row, source)
        simulations.save(key, found)
    return found


def try_simulate(row: RowSpec, source: ModelSource) -> tuple[Prediction | None, str]:
    """simulate, with a row that cannot run (no LoRA targets, an operator the fake tensors cannot take) as
    that row's one-line reason, so the other rows still print. A config that cannot be built at all is the
    model's fault, not the row's: ModelError goes on to the command line as bad input."""
    try:
        return simulate_kept(row, source), ""
    except ModelError:
        raise
    except Exception as error:  # torch, transformers and peft fail with exceptions of many types
        return None, one_line_error(error)
