"""What fake tensors cannot do, done for the simulation as the real run does it, each as a context manager
around the simulation in simulate.py: every one leaves the storages the simulation follows as the real run
makes them, and restores what it changed."""

import contextlib
from collections.abc import Iterator
from typing import Any

from generator.matrix import RowSpec
from generator.quantize import import_bitsandbytes


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


@contextlib.contextmanager
def bitsandbytes_fake_friendly(row: RowSpec, fake: Any) -> Iterator[None]:
    """Two things bitsandbytes does cannot be done on fake tensors; for rows that use it, each is done as the
    real run does it, with the same storages:

    - Params4bit is a Parameter subclass made by Tensor._make_subclass, which a fake tensor cannot take. A
      Params4bit of a fake tensor is made as nn.Parameter makes a parameter of one: the tensor itself, marked
      as a parameter, carrying Params4bit's attributes and the packed storage the real layer holds.
    - The 8-bit quantization maps are computed from values (``create_dynamic_map`` reads them back as Python
      numbers). Each is computed for real, then handed over as a fake tensor of the same 256 floats.

    bitsandbytes' own map cache is restored afterwards, so no fake tensor outlives the simulation."""
    if not (row.quantization or row.optimizer == "adamw8bit"):
        yield
        return
    from torch._subclasses.fake_tensor import FakeTensor
    from torch.utils._python_dispatch import _disable_current_modes

    bnb = import_bitsandbytes()
    params4bit, functional = bnb.nn.Params4bit, bnb.functional
    originals = (params4bit.__dict__["__new__"], functional.create_dynamic_map, dict(functional.name2qmap))

    def fake_friendly(cls: type, data: Any = None, requires_grad: bool = False, **attributes: Any) -> Any:
        if not isinstance(data, FakeTensor):
            return originals[0].__get__(None, cls)(cls, data, requires_grad, **attributes)
        tensor = data.detach().requires_grad_(requires_grad)
        tensor._is_param = True
        defaults = {"quant_state": None, "blocksize": 64, "compress_statistics": True, "quant_type": "fp4",
                    "quant_storage": data.dtype, "module": None, "bnb_quantized": False}
        for name, default in defaults.items():
            setattr(tensor, name, attributes.get(name, default))
        return tensor

    def dynamic_map(*args: Any, **kwargs: Any) -> Any:
        with _disable_current_modes():
            real = originals[1](*args, **kwargs)
        return fake.from_tensor(real)

    params4bit.__new__, functional.create_dynamic_map = fake_friendly, dynamic_map
    functional.name2qmap.clear()
    try:
        yield
    finally:
        params4bit.__new__, functional.create_dynamic_map = originals[:2]
        functional.name2qmap.clear()
        functional.name2qmap.update(originals[2])


@contextlib.contextmanager
def bitsandbytes_cpu_updates(row: RowSpec) -> Iterator[None]:
    """bitsandbytes' optimizer updates on the CPU are Python (backends/cpu/ops.py): each dequantizes the two
    moments of one parameter to fp32, updates them beside an fp32 copy of the gradient (and of the weight, for a
    16-bit one), and quantizes them again. Called through the operator, those temporaries run inside it, where a
    dispatch mode sees none of them; an 8-bit row on Qwen2-0.5B held 2.3 GiB more than its tensors for them.
    For 8-bit AdamW rows the operators are called as their CPU kernels directly, so every temporary is an
    operator of its own, on real tensors and on fake ones alike. CUDA's kernels are fused and hold none of it:
    on a GPU this part of an 8-bit row's answer is the CPU's program, and errs on the safe side."""
    if row.optimizer != "adamw8bit":
        yield
        return
    import torch

    import_bitsandbytes()
    from bitsandbytes.backends.cpu import ops as cpu

    namespace = torch.ops.bitsandbytes
    kernels = {"optimizer_update_8bit_blockwise": cpu._optimizer_update_8bit_blockwise_cpu,
               "optimizer_update_32bit": cpu._optimizer_update_32bit_cpu}
    originals = {name: getattr(namespace, name) for name in kernels}
    for name, kernel in kernels.items():
        setattr(namespace, name, kernel)
    try:
        yield
    finally:
        for name, original in originals.items():
            setattr(namespace, name, original)
