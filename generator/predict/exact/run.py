"""One run of a row's steps under FakeTensorMode, as a program runs them, with its storages tracked
(generator/predict/exact/tracker.py), and the prepared model's counts: the exact simulation. Under PyTorch's own
FakeTensorMode with the tracker's dispatch mode stacked on it (plain_mode) it is the reference; the fast path runs
the same steps under its own FakeTensorMode (generator/predict/fast/fake_mode.py) and at small depths."""

import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from importlib.util import find_spec
from typing import Any

from generator.matrix import RowSpec
from generator.model_source import ModelSource, dtype_argument, from_config, load_config
from generator.predict.exact.cuda_program import Program, cuda_autocast, cuda_sdpa_mode, foreach_updates, host_memory
from generator.predict.exact.fake_friendly import experts_fake_friendly, modules_stay_put, sequences_unpacked
from generator.predict.exact.sharding import share, whole_units
from generator.predict.exact.tracker import StorageTracker
from generator.quantize import (
    bitsandbytes_cpu_updates,
    bitsandbytes_fake_friendly,
    import_bitsandbytes,
    parameter_count,
    quantization_tensors,
    uses_bitsandbytes,
)
from generator.steps import Prepared, prepare, run_steps


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
        prepared.optimizer.register_step_post_hook(state_made)  # each one's, with the optimizer in backward


def _has_experts(model: Any) -> bool:
    return any(hasattr(module, "num_experts") for module in model.modules())


def _uncompiled_imports(row: RowSpec) -> None:
    """bitsandbytes, imported for a row that runs it or peft (which imports it), with dynamo off for the import.
    bitsandbytes wraps four of its CPU kernels in torch.compile as it is imported, and torch.compile imports
    torch's inductor to read its settings: 0.75 of the import's second, paid by the first such row in a process. A
    simulation never runs those kernels (FakeTensorMode answers bitsandbytes' operators by their fake kernels;
    dynamo compiles no frame in a fit, CPU or GPU), and with TORCHDYNAMO_DISABLE set torch.compile returns each
    kernel as it is, without the import. Only the simulator does this: a measured row runs in a fresh worker
    (generator/measure), whose bitsandbytes is imported as it always is."""
    if "bitsandbytes" in sys.modules or not (row.lora_rank or uses_bitsandbytes(row)) or not find_spec("bitsandbytes"):
        return
    before = os.environ.get("TORCHDYNAMO_DISABLE")
    os.environ["TORCHDYNAMO_DISABLE"] = "1"
    try:
        import_bitsandbytes()
    finally:
        if before is None:
            del os.environ["TORCHDYNAMO_DISABLE"]
        else:
            os.environ["TORCHDYNAMO_DISABLE"] = before


def plain_mode(tracker: StorageTracker) -> Any:
    """PyTorch's own FakeTensorMode, with the tracker's dispatch mode entered where tracking begins: the
    reference's mode, one Python dispatch layer above FakeTensorMode, seeing what it returns to the caller."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    fake = FakeTensorMode()
    fake.tracking_on = tracker.mode  # type: ignore[attr-defined]
    return fake


def run_fake(row: RowSpec, source: ModelSource, program: Program, config: Any = None, marks: list[int] | None = None,
             mode: Callable[[StorageTracker], Any] = plain_mode) -> tuple[StorageTracker, Prepared, bool]:
    """Build the model from its config (``config``, else the model's own) under a FakeTensorMode (``mode``: the
    reference's plain one, unless the fast path gives its own) and run the row's steps as the program runs them
    (generator/predict/exact/cuda_program.py), tracking storages; with ``marks``, the journal's length as each
    forward pass of the model begins is added to it (the decode fast path finds the decode steps by them).
    Returns the tracker, the prepared row, and whether the experts went through transformers' fallback op."""
    import torch

    _uncompiled_imports(row)
    tracker = StorageTracker()
    fake = mode(tracker)
    with fake, modules_stay_put(), bitsandbytes_fake_friendly(row, fake):
        model = from_config(source, load_config(source) if config is None else config,
                            **{dtype_argument(): getattr(torch, row.dtype)})
        model.tie_weights()
        prepared = prepare(model, row, lora_targets=source.lora_targets)
    prepared.autocast = cuda_autocast if program.autocast else None
    if program.cuda_updates:
        foreach_updates(prepared.optimizer, tracker)
        prepared.host = lambda: host_memory(tracker)
    with (fake, contextlib.nullcontext() if program.cuda_updates else bitsandbytes_cpu_updates(row), fake.tracking_on(),
          experts_fake_friendly(row.dtype) as rerouted, sequences_unpacked(), bitsandbytes_fake_friendly(row, fake),
          cuda_sdpa_mode() if program.sdpa else contextlib.nullcontext()):
        _watch(tracker, prepared)
        if marks is not None:
            prepared.model.register_forward_pre_hook(lambda *_: marks.append(len(tracker.journal)))
        run_steps(row, prepared, tracker.enter)
    tracker.finish()
    return tracker, prepared, rerouted


@dataclass(frozen=True)
class ModelFacts:
    """What a prediction reads of the prepared model, beside the traces."""

    parameters: int
    trainable: int
    lora_targets: str
    quantization_bytes: int
    whole: dict[str, int]  # what a card of a sharded row holds in full (sharding.whole_units); {} unsharded
    experts: bool


def model_facts(prepared: Prepared, row: RowSpec) -> ModelFacts:
    """The prepared model's counts, its sharding units and whether it has experts."""
    model, parameters = prepared.model, list(prepared.model.parameters())
    quantization = {id(t.untyped_storage()): t.untyped_storage().nbytes() for t in quantization_tensors(model)}
    return ModelFacts(parameters=sum(parameter_count(p) for p in parameters),
                      trainable=sum(p.numel() for p in parameters if p.requires_grad),
                      lora_targets=" ".join(prepared.lora_targets),
                      quantization_bytes=sum(share(size, "weights", row) for size in quantization.values()),
                      whole=whole_units(model, row) if row.sharding else {}, experts=_has_experts(model))
