"""What fake tensors cannot do, done for the simulation as the real run does it, each as a context manager
around the simulation in simulate.py: every one leaves the storages the simulation follows as the real run
makes them, and restores what it changed. bitsandbytes' own (its 4-bit parameters, its 8-bit maps and its CPU
updates) live with the rest of what bitsandbytes does, in generator/quantize.py."""

import contextlib
from collections.abc import Iterator
from typing import Any


@contextlib.contextmanager
def experts_fake_friendly(dtype: str) -> Iterator[bool]:
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


@contextlib.contextmanager
def sequences_unpacked() -> Iterator[None]:
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
def modules_stay_put() -> Iterator[None]:
    """peft moves new adapters with Module.to(), which fake parameters cannot take (they would have to be
    swapped, and fake tensors carry weakrefs). The adapters are already fake CPU tensors: make it a no-op."""
    import torch

    original = torch.nn.Module.to
    torch.nn.Module.to = lambda self, *args, **kwargs: self  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Module.to = original  # type: ignore[method-assign]
