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
from collections.abc import Iterator
from typing import Any

from generator.escaping import one_line_error
from generator.matrix import RowSpec
from generator.measure.method import code_hash
from generator.model_source import ModelError, ModelSource, dtype_argument, load_config
from generator.predict.cuda_allocator import replay
from generator.steps import Prepared, prepare, run_steps
from generator.store import simulations
from generator.store.records import Prediction
from generator.store.simulations import SimulationKey

CATEGORIES = ("weights", "gradients", "optimizer", "activations")
# The simulator's method, recorded with each prediction and fit table; refresh simulates again what an older one
# made. "the real run's mask path": since _sequences_unpacked (before it, GQA models were overcounted).
METHOD = "FakeTensorMode, live tensor storages, the real run's mask path"
# the modules whose code decides a simulation's figures: a kept simulation made by other code is not used
SIMULATOR_MODULES = ("generator.predict.simulate", "generator.predict.cuda_allocator", "generator.steps",
                     "generator.model_source")
FALLBACK_EXPERTS = "; experts through transformers' grouped_mm fallback op (same outputs; its fake kernel takes fp32)"


@contextlib.contextmanager
def _experts_fake_friendly(dtype: str) -> Iterator[bool]:
    """Mixture-of-experts layers of transformers 5 run torch's grouped_mm, whose CPU kernel takes fp32 but
    whose fake (meta) kernel accepts bf16 only. For rows in another dtype, route grouped_mm to transformers'
    own fallback op: it returns the same output tensors, and its fake kernel takes any dtype, so the storages
    the simulation follows are those of the real run. Yields whether it did (transformers 4.x has no such
    layers, and bf16 rows need nothing)."""
    try:
        from transformers.integrations import moe
    except ImportError:  # transformers 4.x: no such layers
        yield False
        return
    if dtype == "bfloat16" or not hasattr(moe, "_can_use_grouped_mm"):
        yield False
        return
    original = moe._can_use_grouped_mm
    moe._can_use_grouped_mm = lambda *args, **kwargs: False
    try:
        yield True
    finally:
        moe._can_use_grouped_mm = original


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

    def track(self, tensor: Any, kind: str = "activations") -> None:
        """Count a tensor's storage once, from now until it is freed."""
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self.sizes:
            return
        self.sizes[key], self.kinds[key] = storage.nbytes(), kind
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
        self.kinds[key] = kind
        self.totals[kind] += self.sizes[key]

    def _free(self, key: int) -> None:
        size = self.sizes.pop(key)
        self.events.append((key, size, False))
        self.totals[self.kinds.pop(key)] -= size
        self.total -= size

    def enter(self, phase: str) -> None:
        """The phase callback of generator/steps.py: close the phase that ended, start the next."""
        self.phase_peaks[self.phase] = self.phase_max
        self.phase, self.phase_max = phase, self.total

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


@contextlib.contextmanager
def _sequences_unpacked() -> Iterator[None]:
    """transformers (4.5x and 5) looks for packed sequences in the position ids before it builds the causal
    mask. Where its answer depends on the values (5.x: no packing, no mask), it cannot read fake tensors and
    assumes packing: the fake run then builds the full mask, and SDPA, given a mask, cannot use grouped-query
    attention natively, so keys and values were repeated per head and kept for backward, which the real run
    never does (SmolLM2's batch-8 training: 240 MiB). The check is made here on real position ids of the same
    shape, as the worker's batches have them (one unpadded sequence per row, positions from 0), with every mode
    off; where the real run would find no packing, the fake run is told so, and otherwise it runs the check
    itself, so releases whose answer does not depend on the values (4.56: always a mask) keep their path."""
    try:
        from transformers import masking_utils
    except ImportError:  # transformers 4.x before the masking module: no such check
        yield
        return
    original = getattr(masking_utils, "find_packed_sequence_indices", None)
    if original is None:
        yield
        return

    def as_the_real_run(position_ids: Any, *args: Any, **kwargs: Any) -> Any:
        import torch
        from torch.utils._python_dispatch import _disable_current_modes

        with _disable_current_modes():
            real = torch.arange(position_ids.shape[-1]).expand(tuple(position_ids.shape))
            unpacked = original(real, *args, **kwargs) is None
        return None if unpacked else original(position_ids, *args, **kwargs)

    masking_utils.find_packed_sequence_indices = as_the_real_run
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = original


@contextlib.contextmanager
def _modules_stay_put() -> Iterator[None]:
    """peft moves new adapters with Module.to(), which fake parameters cannot take (they would have to be
    swapped, and fake tensors carry weakrefs). The adapters are already fake CPU tensors: make it a no-op."""
    import torch

    original = torch.nn.Module.to
    torch.nn.Module.to = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.to = original  # type: ignore[method-assign]


def _watch(tracker: StorageTracker, prepared: Prepared) -> None:
    """Count what exists before the steps, and learn gradients and optimizer state as they appear."""
    model = prepared.model
    for parameter in model.parameters():
        tracker.classify(parameter, "weights")
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


def simulate(row: RowSpec, source: ModelSource) -> Prediction:
    """Build the model from its config under FakeTensorMode and run the row's steps, tracking storages."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from transformers import AutoModelForCausalLM

    started = time.perf_counter()
    tracker, fake = StorageTracker(), FakeTensorMode()
    with fake, _modules_stay_put():
        try:
            model = AutoModelForCausalLM.from_config(load_config(source),
                                                     **{dtype_argument(): getattr(torch, row.dtype)})
        except Exception as error:  # whatever transformers raises for a config it cannot build, as one line
            raise ModelError(f"--model {source.reference}: transformers cannot build it from its config "
                             f"({one_line_error(error)})") from None
        model.tie_weights()
        prepared = prepare(model, row, lora_targets=source.lora_targets)
    with fake, tracker.mode(), _experts_fake_friendly(row.dtype) as rerouted, _sequences_unpacked():
        _watch(tracker, prepared)
        run_steps(row, prepared, tracker.enter)
    tracker.finish()
    parameters = list(prepared.model.parameters())
    split = tracker.peak_split
    return Prediction(
        cuda_reserved_bytes=replay(tracker.events).peak_reserved,
        cuda_expandable_bytes=replay(tracker.events, expandable=True).peak_reserved,
        tensor_peak_bytes=tracker.peak, phase=tracker.peak_phase, weights_bytes=split["weights"],
        gradients_bytes=split["gradients"], optimizer_bytes=split["optimizer"],
        activations_bytes=split["activations"], phase_peak_bytes=dict(tracker.phase_peaks),
        parameters=sum(p.numel() for p in parameters),
        trainable_parameters=sum(p.numel() for p in parameters if p.requires_grad),
        lora_targets=" ".join(prepared.lora_targets),
        method=METHOD + (FALLBACK_EXPERTS if rerouted and _has_experts(prepared.model) else ""),
        seconds=time.perf_counter() - started)


def simulation_key(row: RowSpec, source: ModelSource) -> SimulationKey:
    """What a kept simulation of this row is filed under: the config, the row, the LoRA targets, the library
    versions and the simulator (its method and the hash of its code, so an edit is never served stale)."""
    import peft
    import torch
    import transformers

    return SimulationKey(config_sha256=source.config_sha256, row=row.id, lora_targets=" ".join(source.lora_targets),
                         libraries=f"torch {torch.__version__}, transformers {transformers.__version__}, "
                                   f"peft {peft.__version__}",
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
