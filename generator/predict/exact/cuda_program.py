"""The GPU's program, run on the CPU's fake tensors: where CUDA runs other code than the CPU, and that code
allocates other storages, the simulation of a GPU figure runs what CUDA would run.

The simulation stays on fake CPU tensors. Fake CUDA tensors are no way out: a CPU build of torch aborts the
process in SDPA's math path on them, and a CUDA build without a device cannot run backward on them (the
autograd engine asks for the device's context). So four decisions CUDA makes are applied explicitly, each
from PyTorch's or bitsandbytes' own source, and everything else runs as it does on the CPU:

1. **SDPA's backend** (``aten/src/ATen/native/transformers/cuda/sdp_utils.cpp``, torch 2.13, a card of sm80 or
   newer). Flash attention for fp16 and bf16 without a mask, with equal head sizes of 256 or less (grouped-query
   attention native); else memory-efficient attention (fp16, bf16 and fp32, a mask allowed, equal head counts,
   head sizes a multiple of the GEMM alignment); else the math fallback, which materialises the attention
   matrix. (torch 2.13's own documentation of scaled_dot_product_attention: grouped-query attention "currently
   works only for Flash_attention and math kernel on CUDA tensor".) The chosen backend's aten operator runs, so
   what it saves for backward is what its autograd formula saves, at its fake kernel's sizes. cuDNN attention,
   first on sm90 and sm100, saves the same output and log-sum-exp as flash attention, so it is not told apart.
2. **CUDA autocast's op lists** (``aten/src/ATen/autocast_mode.h``): the model's calls of listed functions get
   CUDA's casts (matrix products to bf16; pow, rsqrt, exp, norms, losses to fp32; softmax, sum and cumsum with
   an fp32 result; promotion for the rest of the list), with the CPU's autocast kernels kept out of the call.
   As autocast does, a weight's cast is made once per autocast region and kept until the region ends. (A
   forward that gradient checkpointing recomputes in backward gets the CPU's lists: no function mode is on
   there. No set-up the site answers combines the two.)
3. **bitsandbytes' 8-bit optimizer update** is CUDA's fused kernel, in place, with none of the CPU update's
   fp32 temporaries (generator/quantize.py ``bitsandbytes_cpu_updates`` is the CPU's program).
4. **torch's AdamW update** is its foreach implementation (``torch/optim/optimizer.py``,
   ``_default_to_fused_or_foreach``: foreach wherever every parameter is on CUDA, a for-loop on the CPU). It
   updates every parameter at once, so its temporaries are those of every parameter together
   (``adam.py`` ``_multi_tensor_adam``: ``torch._foreach_sqrt(exp_avg_sqs)``), where the CPU's loop holds one
   parameter's at a time. What an update makes counts as optimizer state (``foreach_updates``), so a card of a
   sharded row, which updates its own shard, holds its share of them.

Two things a GPU's program keeps in host memory, where the CPU's keeps them with everything else, are made as
host storages (``host_memory``), counted apart from the device's peak and never replayed through the caching
allocator: the copies that activation offloading makes (generator/savers.py), and the moments of bitsandbytes'
paged optimizers for a parameter of 100,000 elements or more (``optim/optimizer.py`` ``get_state_buffer``:
``F.get_paged``, CUDA's unified memory, which ``max_memory_allocated`` does not count; ``paged_state``)."""

import contextlib
from collections import Counter
from collections.abc import Iterator
from typing import Any, NamedTuple


class Program(NamedTuple):
    """Which of CUDA's decisions a simulation applies: all of them for a GPU figure, none for the CPU's
    (``cuda_updates``: the optimizers' updates as CUDA runs them, decisions 3 and 4)."""

    sdpa: bool
    autocast: bool
    cuda_updates: bool


CPU, CUDA, CUDA_SDPA_ONLY = Program(False, False, False), Program(True, True, True), Program(True, False, False)
# The SDPA backends chosen since the counter was last cleared, each call counted: what the programs report
# (generator/predict/programs.py) names as the ops that differ.
BACKENDS_CHOSEN: Counter[str] = Counter()

LOWER = frozenset({"_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
                   "conv_transpose2d", "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr",
                   "matmul", "einsum", "mm", "mv", "linalg_vecdot", "linear", "addbmm", "baddbmm", "bmm",
                   "chain_matmul", "linalg_multi_dot", "lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell",
                   "scaled_dot_product_attention"})
FP32 = frozenset({"acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
                  "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm", "cosine_similarity",
                  "poisson_nll_loss", "cosine_embedding_loss", "nll_loss", "hinge_embedding_loss", "kl_div",
                  "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
                  "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
                  "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
                  # not listed itself: its parts are (log_softmax, nll_loss), so its input reaches them as fp32
                  "cross_entropy"})
FP32_RESULT = frozenset({"prod", "softmax", "log_softmax", "cumprod", "cumsum", "sum"})  # dtype=float32 if unset
PROMOTE = frozenset({"addcdiv", "addcmul", "atan2", "bilinear", "cross", "dot", "vdot", "index_put", "tensordot",
                     "scatter_add"})


def function_name(func: Any) -> str:
    """'pow' for torch.pow, Tensor.pow, Tensor.__pow__ and __rpow__; 'linear' for F.linear."""
    name = getattr(func, "__name__", "")
    if name.startswith("__") and name.endswith("__"):
        name = name.strip("_")
        name = name[1:] if name in ("rpow", "rmatmul") else name
    return name


def sdpa_backend(query: Any, key: Any, value: Any, mask: Any, enable_gqa: bool) -> str:
    """The backend CUDA's SDPA picks on a card of sm80 or newer: 'flash', 'efficient' or 'math'."""
    import torch

    low = query.dtype in (torch.float16, torch.bfloat16)
    head, same_heads = query.shape[-1], key.shape[-3] == query.shape[-3] == value.shape[-3]
    same_dims = key.shape[-1] == head == value.shape[-1]
    if mask is None and low and same_dims and head <= 256 and (same_heads or enable_gqa):
        return "flash"
    alignment = 8 if low else 4  # the GEMM alignment on sm80+: 128 bits over the element's width, at least 4
    if same_heads and key.shape[-1] == head and head % alignment == 0 and value.shape[-1] % alignment == 0:
        return "efficient"
    return "math"


def _efficient_bias(mask: Any, query: Any) -> Any:
    """The mask as memory-efficient attention takes it: a boolean mask becomes an additive one in the query's
    dtype, and its last dimension is padded to 16 elements and sliced back (sdp_utils' pad_bias)."""
    import torch

    if mask is None:
        return None
    if mask.dtype == torch.bool:
        mask = torch.zeros_like(mask, dtype=query.dtype).masked_fill_(mask.logical_not(), float("-inf"))
    length = mask.shape[-1]
    if length % 16:
        padded = torch.nn.functional.pad(mask, (0, 16 - length % 16))
        mask = padded[..., :length]
    return mask


def cuda_sdpa(query: Any, key: Any, value: Any, attn_mask: Any = None, dropout_p: float = 0.0,
              is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False) -> Any:
    """scaled_dot_product_attention through the aten operator of the backend CUDA would pick. Under autocast its
    floating inputs are cast first, as both devices' autocast lists it (so a mixed-precision row's fp32 queries,
    made fp32 by the rotary embedding, reach the backend choice as bf16)."""
    import torch

    if torch.is_autocast_enabled("cpu"):  # the step's autocast (the CPU's state also marks CUDA's, above)
        dtype = torch.get_autocast_dtype("cpu")
        query, key, value, attn_mask = (_cast(t, dtype, {}) for t in (query, key, value, attn_mask))
    aten = torch.ops.aten
    backend = sdpa_backend(query, key, value, attn_mask, enable_gqa)
    BACKENDS_CHOSEN[backend] += 1
    if backend == "flash":
        return aten._scaled_dot_product_flash_attention(query, key, value, dropout_p, is_causal, False,
                                                        scale=scale)[0]
    if backend == "efficient":
        grad = query.requires_grad or key.requires_grad or value.requires_grad
        return aten._scaled_dot_product_efficient_attention(query, key, value, _efficient_bias(attn_mask, query),
                                                            grad, dropout_p, is_causal, scale=scale)[0]
    return aten._scaled_dot_product_attention_math(query, key, value, attn_mask, dropout_p, is_causal, None,
                                                   scale=scale, enable_gqa=enable_gqa)[0]


def _cast(value: Any, dtype: Any, cache: dict[int, Any]) -> Any:
    """One argument cast as autocast casts it: floating tensors only; a weight (a leaf that needs a gradient)
    through the region's cache, so it is cast once and its copy kept until the region ends."""
    import torch

    if not (isinstance(value, torch.Tensor) and value.is_floating_point()) or value.dtype in (dtype, torch.float64):
        return value
    if value.is_leaf and value.requires_grad:
        if id(value) not in cache:
            cache[id(value)] = (value, value.to(dtype))  # the weight is kept too, so its id stays its own
        return cache[id(value)][1]
    return value.to(dtype)


def _widest(args: tuple, kwargs: dict) -> Any:
    import torch
    from torch.utils._pytree import tree_leaves

    floats = [leaf.dtype for leaf in tree_leaves((args, kwargs))
              if isinstance(leaf, torch.Tensor) and leaf.is_floating_point()]
    return torch.float32 if torch.float32 in floats else (floats[0] if floats else None)


def autocast_arguments(name: str, args: tuple, kwargs: dict, dtype: Any, cache: dict[int, Any]) -> tuple[tuple, dict]:
    """The arguments of one call as CUDA autocast hands them on."""
    import torch
    from torch.utils._pytree import tree_map

    target = (dtype if name in LOWER else torch.float32 if name in FP32
              else _widest(args, kwargs) if name in PROMOTE else None)
    if target is not None:
        return tree_map(lambda value: _cast(value, target, cache), (args, kwargs))
    if name in FP32_RESULT and kwargs.get("dtype") is None:
        first = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if first is not None and first.dtype in (torch.float16, torch.bfloat16):
            return args, {**kwargs, "dtype": torch.float32}
    return args, kwargs


def _autocast_mode(dtype: Any) -> Any:
    """A function mode that gives the calls made while autocast is on CUDA autocast's casts."""
    import torch
    from torch.overrides import TorchFunctionMode

    class Autocast(TorchFunctionMode):
        def __init__(self) -> None:
            super().__init__()
            self.cache: dict[int, Any] = {}  # a weight's id -> (the weight, its cast), for one autocast region

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            if not torch.is_autocast_enabled("cpu"):  # a region inside that turned autocast off
                return func(*args, **kwargs)
            args, kwargs = autocast_arguments(function_name(func), args, kwargs, dtype, self.cache)
            keep_out = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastCPU)
            with torch._C._ExcludeDispatchKeyGuard(keep_out):  # the CPU's own lists do not apply
                return func(*args, **kwargs)

    return Autocast()


@contextlib.contextmanager
def cuda_sdpa_mode() -> Iterator[None]:
    """SDPA as CUDA runs it, for the whole simulation. The function itself is swapped, not intercepted by a
    function mode: gradient checkpointing recomputes the forward in backward, where no function mode is on."""
    import torch

    functional = torch.nn.functional
    original = functional.scaled_dot_product_attention
    functional.scaled_dot_product_attention = cuda_sdpa
    try:
        yield
    finally:
        functional.scaled_dot_product_attention = original


@contextlib.contextmanager
def cuda_autocast(enabled: bool) -> Iterator[None]:
    """bf16 autocast as CUDA applies it, in place of the CPU's (generator/steps.py takes it as the step's
    autocast). The CPU's autocast is entered too, for its on-and-off state only, so that a region the model
    turns off (rotary embeddings) is off here as well."""
    import torch

    if not enabled:
        yield
        return
    mode = _autocast_mode(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16), mode:
        yield
    mode.cache.clear()  # as autocast clears its cast cache on leaving its outermost region


def foreach_updates(optimizer: Any, tracker: Any) -> None:
    """torch's AdamW as CUDA runs it (the module's decision 4): its foreach update, with what an update makes
    counted as optimizer state (``tracker``: the simulation's StorageTracker), for each optimizer of the row (one
    per parameter with the optimizer in backward). bitsandbytes' optimizer is left as it is (decision 3), but
    for its paged state (``paged_state``)."""
    import torch

    from generator.savers import each_optimizer

    for one in each_optimizer(optimizer):
        if not isinstance(one, torch.optim.AdamW):
            paged_state(one, tracker)
            continue
        for group in one.param_groups:
            group["foreach"] = True
        one.register_step_pre_hook(lambda *_: setattr(tracker, "making", "optimizer"))
        one.register_step_post_hook(lambda *_: setattr(tracker, "making", "activations"))


@contextlib.contextmanager
def host_memory(tracker: Any) -> Iterator[None]:
    """What is made inside is host memory (the tracker's HOST kind)."""
    from generator.predict.exact.tracker import HOST

    before, tracker.making = tracker.making, HOST
    try:
        yield
    finally:
        tracker.making = before


def paged_state(optimizer: Any, tracker: Any) -> None:
    """A paged bitsandbytes optimizer's moments as CUDA keeps them: in unified memory, host memory here, for a
    parameter of 100,000 elements or more (get_state_buffer's rule); the rest on the device."""
    import torch

    if not getattr(optimizer, "is_paged", False):
        return

    def get_state_buffer(p: Any, dtype: Any = torch.float32) -> Any:
        if p.numel() < 1e5:
            return torch.zeros_like(p, dtype=dtype, device=p.device)
        with host_memory(tracker):
            return torch.zeros_like(p, dtype=dtype, device=p.device)

    optimizer.get_state_buffer = get_state_buffer
