"""The bitsandbytes set-ups of a row, shared by the worker and the simulator through generator/steps.py:

- ``nf4``: QLoRA's base. Every linear layer but the output head becomes a bitsandbytes ``Linear4bit`` holding
  NF4 weights (two per byte) with double-quantized block scales, computing in bf16, as transformers'
  bitsandbytes integration does for ``load_in_4bit=True, bnb_4bit_quant_type="nf4",
  bnb_4bit_use_double_quant=True, bnb_4bit_compute_dtype=bfloat16``. A config has no weights to load, so the
  layers built from it are quantized in place, one at a time.
- ``adam8``: bitsandbytes' ``AdamW8bit``, whose two moments are stored in one byte an element with fp32 block
  scales (parameters under 4,096 elements keep fp32 moments, as bitsandbytes decides).
- For the simulator (generator/predict/simulate.py), what bitsandbytes does that fake tensors cannot take, done
  as the real run does it: ``bitsandbytes_fake_friendly`` and ``bitsandbytes_cpu_updates``. A bitsandbytes
  set-up's behaviour, real and simulated, is all in this file.

bitsandbytes is imported only by rows that use it, but peft imports it wherever it is installed, and
bitsandbytes then logs a note about optional CPU kernels from the hub on every import. That note is not the
user's business: importing this module (which the CLI's measuring commands and the worker server do before
peft) keeps bitsandbytes' log at errors."""

import contextlib
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from generator.matrix import RowSpec

logging.getLogger("bitsandbytes").setLevel(logging.ERROR)

# transformers' defaults for a 4-bit load: 64-element blocks, the scales quantized again in blocks of 256
NF4_BLOCKSIZE = 64
SKIPPED_MODULES = ("lm_head",)  # the output head stays in the model's dtype (transformers' get_keys_to_not_convert)
LEARNING_RATE = 1e-4
EIGHT_BIT_OPTIMIZERS = ("adamw8bit", "paged_adamw8bit")  # coordinates.OPTIMIZERS that bitsandbytes runs
DEFERRED_BOUND = 0.02 * 3**0.5  # a deferred weight's uniform draw: the usual initializer range's standard deviation


def uses_bitsandbytes(row: "RowSpec") -> bool:
    """Whether a row runs bitsandbytes: a 4-bit base, or its 8-bit AdamW."""
    return bool(row.quantization) or row.optimizer in EIGHT_BIT_OPTIMIZERS


def checkpointed_four_bit(row: "RowSpec") -> bool:
    """A 4-bit base under gradient checkpointing: its trace does not extend by depth (predict/small_depths.py),
    so it is simulated at full depth. On SmolLM2's 30 layers, the frees after the first layer's recompute come in
    another order than the small depths' trace extends to (a 4-byte storage, bitsandbytes' scalar, freed before two
    of the layer's 73,728-byte activations instead of after): the same peaks and reserves, not the same trace, and
    the fast path must give the trace itself (tests/test_depth.py)."""
    return bool(row.quantization) and row.gradient_checkpointing


def import_bitsandbytes() -> Any:
    """bitsandbytes, imported where a row needs it (its import notes are kept off stderr above)."""
    import bitsandbytes

    return bitsandbytes


def _linear_layers(model: Any) -> Iterator[tuple[Any, str, Any, Any]]:
    """(parent, name, layer, its weight as out × in) for every linear layer but the skipped ones: torch's
    Linear and its subclasses (Falcon's FalconLinear), and GPT-2's Conv1D, whose weight is stored in × out
    (transformers' integration converts every ``isinstance(module, nn.Linear)`` and Conv1D)."""
    import torch
    from transformers.pytorch_utils import Conv1D

    for parent in list(model.modules()):
        for name, child in list(parent.named_children()):
            if name in SKIPPED_MODULES:
                continue
            if isinstance(child, torch.nn.Linear) and not type(child).__module__.startswith("bitsandbytes"):
                yield parent, name, child, child.weight.detach()
            elif isinstance(child, Conv1D):
                yield parent, name, child, child.weight.detach().t()


@contextlib.contextmanager
def linear_weights_deferred() -> Iterator[None]:
    """While a model is built from its config, leave its linear layers' weights on the meta device (no
    memory), so that a 4-bit row never holds the whole model in full precision: transformers quantizes a
    checkpoint's linear layers as it loads them, and quantize_nf4 makes each layer's weight just before it
    quantizes it. GPT-2's Conv1D takes no device: its weight is moved to meta as soon as it is made."""
    import torch
    from transformers.pytorch_utils import Conv1D

    linear_init, conv_init = torch.nn.Linear.__init__, Conv1D.__init__

    def deferred_linear(self: Any, *args: Any, **kwargs: Any) -> None:
        linear_init(self, *args, **{**kwargs, "device": "meta"})

    def deferred_conv(self: Any, *args: Any, **kwargs: Any) -> None:
        conv_init(self, *args, **kwargs)
        self.weight = torch.nn.Parameter(self.weight.detach().to("meta"))
        self.bias = torch.nn.Parameter(self.bias.detach().to("meta"))

    torch.nn.Linear.__init__, Conv1D.__init__ = deferred_linear, deferred_conv  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.nn.Linear.__init__, Conv1D.__init__ = linear_init, conv_init  # type: ignore[method-assign]


def _made(tensor: Any) -> Any:
    """A tensor left on the meta device by linear_weights_deferred, made now (random, as the worker fills
    weights: values do not change memory); any other tensor as it is."""
    import torch

    if not tensor.is_meta:
        return tensor
    made = torch.empty(tensor.shape, dtype=tensor.dtype)
    return made.uniform_(-DEFERRED_BOUND, DEFERRED_BOUND) if tensor.dim() >= 2 else made.zero_()


def quantize_nf4(model: Any) -> Any:
    """Replace the model's linear layers (the output head excepted) by NF4 ``Linear4bit`` layers, each quantized
    from the layer it replaces, whose full-precision weight is then freed. A model with no such layer is refused:
    it would train as plain LoRA under a 4-bit row's name."""
    import torch

    bnb = import_bitsandbytes()
    _make_skipped(model)
    for parent, name, layer, weight in _linear_layers(model):
        weight = _made(weight)
        packed, state = bnb.functional.quantize_4bit(weight.contiguous(), blocksize=NF4_BLOCKSIZE,
                                                     compress_statistics=True, quant_type="nf4")
        out_features, in_features = weight.shape
        quantized = bnb.nn.Linear4bit(in_features, out_features, bias=layer.bias is not None,
                                      compute_dtype=torch.bfloat16, quant_type="nf4", device="meta")
        quantized.weight = bnb.nn.Params4bit(packed, requires_grad=False, quant_state=state,
                                             blocksize=NF4_BLOCKSIZE, compress_statistics=True, quant_type="nf4",
                                             module=quantized, bnb_quantized=True)
        quantized.quant_state = state
        if layer.bias is not None:
            quantized.bias = torch.nn.Parameter(_made(layer.bias.detach()), requires_grad=layer.bias.requires_grad)
        setattr(parent, name, quantized)
        del layer, weight
    if any(p.is_meta for p in model.parameters()):
        raise ValueError(f"a weight of {type(model).__name__} was deferred and never made")
    if not any(isinstance(m, bnb.nn.Linear4bit) for m in model.modules()):
        raise ValueError(f"no linear layer to quantize in {type(model).__name__}: a 4-bit row needs one")
    model.is_loaded_in_4bit = True  # what peft reads to wrap Linear4bit layers in its 4-bit LoRA layers
    return model


def _make_skipped(model: Any) -> None:
    """The output head, which stays in the model's dtype: made where it was deferred and not tied."""
    import torch

    for module in model.modules():
        for name, child in module.named_children():
            if name in SKIPPED_MODULES and getattr(child, "weight", None) is not None and child.weight.is_meta:
                child.weight = torch.nn.Parameter(_made(child.weight.detach()))


def quantization_tensors(model: Any) -> list[Any]:
    """The tensors that undo each 4-bit layer's quantization (block scales, their own scales, maps and offsets),
    read from the layers' weights, so a model without any needs no bitsandbytes."""
    found = []
    for module in model.modules():
        state = getattr(module._parameters.get("weight"), "quant_state", None)
        if state is not None:
            found += [state.absmax, state.code, state.offset]
            if state.state2 is not None:
                found += [state.state2.absmax, state.state2.code]
    return [tensor for tensor in found if tensor is not None]


@contextlib.contextmanager
def matmul_4bit_program(row: "RowSpec") -> Iterator[None]:
    """The 4-bit matmul of the bitsandbytes release a row names (``bnb042``), for the row's steps; the installed
    one's elsewhere. Before 0.43.2, ``MatMul4Bit.forward`` kept its input for backward (``ctx.tensors = (A, B)``)
    wherever the input or the weight needed a gradient, though backward reads only B (a 4-bit weight takes no
    gradient): in QLoRA, where the input always needs one, every 4-bit layer kept its input alive until the
    graph was freed. bitsandbytes#1270 ("fix QLoRA mem bug: delete useless buffered activation", 0.43.2) keeps
    ``(None, B)``. The older program is the installed forward and backward with that one assignment as 0.42.0
    made it (bitsandbytes/autograd/_functions.py at the 0.42.0 tag): the same storages, held as long."""
    if not row.bitsandbytes:
        yield
        return
    functions = import_bitsandbytes().autograd._functions
    installed = functions.MatMul4Bit

    class KeepsInput(installed):  # type: ignore[misc, valid-type]
        @staticmethod
        def forward(ctx: Any, A: Any, B: Any, out: Any = None, bias: Any = None, quant_state: Any = None) -> Any:
            output = installed.forward(ctx, A, B, out, bias, quant_state)
            if not ctx.is_empty and any(ctx.needs_input_grad[:2]):
                ctx.tensors = (A, ctx.tensors[1])
            return output

    functions.MatMul4Bit = KeepsInput
    try:
        yield
    finally:
        functions.MatMul4Bit = installed


def adamw_8bit(parameters: list[Any], paged: bool = False) -> Any:
    """bitsandbytes' 8-bit AdamW, paged or not, at the learning rate of the fp32 AdamW rows. On a CPU the paged
    one makes its state as AdamW8bit does, and says so once as its first step runs: the row's id says it already,
    so the note is marked given."""
    optim = import_bitsandbytes().optim
    if not paged:
        return optim.AdamW8bit(parameters, lr=LEARNING_RATE)
    optimizer = optim.PagedAdamW8bit(parameters, lr=LEARNING_RATE)
    optimizer._cpu_paged_warned = True  # bitsandbytes' own flag for "Paged optimizers are not supported on CPU"
    return optimizer


def parameter_count(parameter: Any) -> int:
    """A parameter's elements as the model defines them: a 4-bit weight packs two in each of its bytes, and its
    quantization state keeps the shape it was quantized from."""
    state = getattr(parameter, "quant_state", None)
    return state.shape.numel() if state is not None else parameter.numel()


@contextlib.contextmanager
def bitsandbytes_fake_friendly(row: "RowSpec", fake: Any) -> Iterator[None]:
    """Two things bitsandbytes does cannot be done on fake tensors; for rows that use it, each is done as the
    real run does it, with the same storages:

    - Params4bit is a Parameter subclass made by Tensor._make_subclass, which a fake tensor cannot take. A
      Params4bit of a fake tensor is made as nn.Parameter makes a parameter of one: the tensor itself, marked
      as a parameter, carrying Params4bit's attributes and the packed storage the real layer holds.
    - The 8-bit quantization maps are computed from values (``create_dynamic_map`` reads them back as Python
      numbers). Each is computed for real, then handed over as a fake tensor of the same 256 floats.

    bitsandbytes' own map cache is restored afterwards, so no fake tensor outlives the simulation."""
    if not uses_bitsandbytes(row):
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
def bitsandbytes_cpu_updates(row: "RowSpec") -> Iterator[None]:
    """bitsandbytes' optimizer updates on the CPU are Python (backends/cpu/ops.py): each dequantizes the two
    moments of one parameter to fp32, updates them beside an fp32 copy of the gradient (and of the weight, for a
    16-bit one), and quantizes them again. Called through the operator, those temporaries run inside it, where a
    dispatch mode sees none of them; an 8-bit row on Qwen2-0.5B held 2.3 GiB more than its tensors for them.
    For 8-bit AdamW rows the operators are called as their CPU kernels directly, so every temporary is an
    operator of its own, on real tensors and on fake ones alike. CUDA's kernels are fused and hold none of it:
    on a GPU this part of an 8-bit row's answer is the CPU's program, and errs on the safe side."""
    if row.optimizer not in EIGHT_BIT_OPTIMIZERS:
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
