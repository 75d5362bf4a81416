"""The fast path's FakeTensorMode (exact/run.py runs each row's steps under one, as the fast path asks): PyTorch's
own, with five things added here and two answers made directly (points 6 and 7, fake_hits.py).

1. **It tracks storages** (tracker.py): inside ``tracking_on()``, the storage of every tensor an operator returns
   to the code that called it. That is what a dispatch mode stacked on a plain FakeTensorMode sees, with one
   Python dispatch layer fewer per operator; the operators FakeTensorMode runs inside another (its
   decompositions) are not tracked, as such a mode never sees them either.
2. **It finds a repeated operator in FakeTensorMode's own cache by a cheaper key.** FakeTensorMode keys its cache
   by the operator, a few global settings, and every argument with each tensor's full metadata, built in Python
   for every call: about a third of a simulation's time. The key here (``call_key``) holds the same things read
   more directly (a tensor's dtype, sizes, strides, offset, storage bytes, flags and device, each a method call),
   so two calls with the same key have the same FakeTensorMode key. It is learnt, with FakeTensorMode's entry, the
   first time FakeTensorMode caches a call under it; a later call with that key is answered from the entry by
   FakeTensorMode's own code, as a hit in its cache is. Calls FakeTensorMode does not cache are not learnt this
   way (point 4 learns a few kinds by their outputs). FakeTensorMode's key for a call being learnt is made once:
   the mode hands FakeTensorMode the one it made just before the call (``_cache_key``), where each was made twice
   (0.72 s of keys in a one-process fit, half of them again). With ``CHECK_KEYS`` on, every such answer first
   checks that the call's FakeTensorMode key is the learnt one, and each key handed over that it is the one
   FakeTensorMode makes (tests/test_fake_mode.py runs every architecture's set-ups so).
3. **It asks ``aten._unsafe_view`` as ``aten.view``.** FakeTensorMode's cache refuses the first ("unsafe view"),
   and it runs it by its Python decomposition, which calls ``aten.view`` on the same arguments (``_reshape_alias``
   in torch/_decomp/decompositions.py), so each such call (a matmul's reshaped output, hundreds a step) took the
   slow path to the same view. Asked as a view, that tensor comes from the cache. Autograd, which is above this
   mode, still saw ``_unsafe_view``.
4. **It learns bitsandbytes' operators and the foreach ones itself** (``FRESH_NAMESPACES``, ``FRESH_PREFIX``).
   FakeTensorMode never caches an operator that is not PyTorch's own ("non-builtin"), so each of a QLoRA step's
   4-bit matmuls and (de)quantizations took its slow path, a quarter of the run; nor one that returns a list
   (AdamW's foreach square root of every moment, 4 % of a training run). Where such a call, of an operator whose
   schema says it changes none of its arguments, returned new tensors only (none on an argument's storage or on
   another output's, each on a storage that ``empty_strided`` of its sizes and strides makes alike), their sizes,
   strides, dtypes and devices are learnt under the call's key, and a later call with that key gets new tensors of
   those, made by ``empty_strided`` (from FakeTensorMode's cache). With ``CHECK_KEYS`` on, each such call is run
   as well and its outputs must have what was learnt.
5. **Its ``__torch_dispatch__`` is FakeTensorMode's dispatch, with no wrapper.** PyTorch wraps each dispatch mode's
   ``__torch_dispatch__`` in a guard that keeps dynamo out of it, and FakeTensorMode's in a call counter too: layers
   of Python around every operator, and around each of the autograd engine's device queries (over a thousand a
   layer in a training step). Nothing in a simulation is compiled, so this mode declines the guard
   (``_should_skip_dynamo``) and calls the dispatch that FakeTensorMode's ``__torch_dispatch__`` calls."""

import contextlib
import functools
from collections.abc import Iterator
from types import FunctionType, SimpleNamespace
from typing import Any

from generator.predict.fast import fake_hits

# call_key -> (FakeTensorMode's key, its cache entry); or (FRESH, (what it returned, its outputs' specs)) for a call
# whose new outputs are learnt (point 4); or SKIP for any other call FakeTensorMode does not cache; for the process,
# as FakeTensorMode's own cache is
LEARNT: dict[tuple[Any, ...], Any] = {}
SKIP = "not cached by FakeTensorMode"
CHECK_KEYS = False
FRESH_NAMESPACES = frozenset({"bitsandbytes"})  # custom operators whose new outputs are learnt here (point 4),
FRESH_PREFIX = "aten::_foreach_"  # and PyTorch's foreach operators, which return lists


@functools.cache
def _torch() -> Any:
    """What the key and the dispatch read of torch, imported once (this module is imported without torch)."""
    import torch
    from torch._subclasses import fake_tensor
    from torch.fx.experimental.proxy_tensor import get_proxy_mode
    from torch.utils import _pytree as pytree
    from torch.utils._mode_utils import no_dispatch

    refused = (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool, FunctionType)  # FakeTensor is checked first
    plain = frozenset({int, float, bool, str, type(None), torch.dtype, torch.device, torch.layout, torch.memory_format})
    return SimpleNamespace(torch=torch, fake_tensor=fake_tensor, FakeTensor=fake_tensor.FakeTensor,
                           get_proxy_mode=get_proxy_mode, refused=refused, plain=plain,
                           plain_reads=torch._C.DisableTorchFunctionSubclass,
                           unsafe_view=torch.ops.aten._unsafe_view.default, view=torch.ops.aten.view.default,
                           item=torch.ops.aten._local_scalar_dense.default, no_dispatch=no_dispatch,
                           empty_strided=torch.ops.aten.empty_strided.default, leaves=pytree.tree_leaves)


def _add(mode: Any, argument: Any, key: list[Any], found: Any) -> bool:
    """Append what FakeTensorMode's key holds of an argument, read directly; False for an argument its cache never
    takes (a real tensor, a symbolic size, a function, a fake tensor of another mode or with a constant). An argument
    of a plain type (``found.plain``: a number, a string, None, a dtype, device, layout or memory format; none of
    them refused, a sequence or unhashable) is appended as the last line would append it, without the checks."""
    if type(argument) in found.plain:
        key.append((type(argument), argument))
        return True
    if isinstance(argument, found.FakeTensor):
        if argument.fake_mode is not mode or argument.constant is not None or argument.layout != found.torch.strided:
            return False
        key.append((argument.dtype, argument.shape, argument.stride(), argument.storage_offset(),
                    argument.untyped_storage().nbytes(), argument.requires_grad, argument.is_conj(),
                    argument.is_neg(), argument.is_inference(), argument.device))
        return True
    if isinstance(argument, found.refused):
        return False
    if isinstance(argument, (list, tuple)):  # torch.Size too: the type is part of the key
        key.append((type(argument), len(argument)))
        for item in argument:  # noqa: SIM110 (a loop, not all() of a generator: a key is built for every operator)
            if not _add(mode, item, key, found):
                return False
        return True
    if isinstance(argument, dict):
        key.append((dict, len(argument)))
        for name, value in argument.items():  # noqa: SIM110 (as above)
            if not (_add(mode, name, key, found) and _add(mode, value, key, found)):
                return False
        return True
    if type(argument).__hash__ is None:
        return False
    key.append((type(argument), argument))  # 1 and 1.0 are equal but make tensors of other dtypes
    return True


def call_key(mode: Any, func: Any, args: Any, kwargs: Any) -> tuple[Any, ...] | None:
    """What FakeTensorMode's cache key holds of a call (the operator, the default dtype and device, inference
    mode, tracing, each argument), read directly; None where its cache would not take the call."""
    found = _torch()
    torch = found.torch
    key = [func, torch.get_default_dtype(), torch._C._get_default_device(), torch.is_inference_mode_enabled(),
           found.get_proxy_mode() is not None]
    with found.plain_reads():  # a fake tensor's metadata read without its subclass's torch-function check: same values
        return tuple(key) if _add(mode, args, key, found) and _add(mode, kwargs, key, found) else None


def tracking_fake_mode(tracker: Any) -> Any:
    """A FakeTensorMode that tracks into ``tracker`` (a StorageTracker) inside its ``tracking_on()``, and answers
    repeated operators by the learnt key."""
    return _mode_class()(tracker)


@functools.cache
def _mode_class() -> Any:
    """The simulation's FakeTensorMode class, made once (each run's mode holds its own tracker)."""
    from torch._subclasses.fake_tensor import _DISPATCH_META_HANDLERS, FakeTensorMode

    class _SimulationFakeMode(FakeTensorMode):
        tracking = False
        depth = 0  # operators being run: 1 for the caller's, more inside FakeTensorMode's own
        made_attributes: dict[str, Any] | None = None  # what FakeTensor's constructor gives a new tensor (fake_hits)

        def __init__(self, tracker: Any) -> None:
            super().__init__()
            self.tracker = tracker

        @classmethod
        def _should_skip_dynamo(cls) -> bool:
            return False  # point 5: no dynamo guard around __torch_dispatch__, as nothing here is compiled

        pending_key: tuple[Any, ...] | None = None  # point 2: (func, args, kwargs, its key), for the call _learn runs

        def _cache_key(self, state: Any, func: Any, args: Any, kwargs: Any) -> Any:
            return _handed_key(self, FakeTensorMode, state, func, args, kwargs)

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            handler = _DISPATCH_META_HANDLERS.get(func)
            if handler is not None:  # a tensor's device, sizes or strides asked: what FakeTensorMode answers first,
                return handler(args)  # without the rest of its dispatch; no tensor is returned
            if not self.tracking:  # FakeTensorMode's __torch_dispatch__ is its dispatch, guarded and counted (point 5)
                return self.dispatch(func, types, args, kwargs or {})
            self.depth += 1
            try:
                out = self.dispatch(func, types, args, kwargs or {})
            finally:
                self.depth -= 1
            if self.depth == 0:
                self.tracker.returned(out)
            return out

        def dispatch(self, func, types, args=(), kwargs=None):
            return _dispatch(self, FakeTensorMode, func, types, args, kwargs or {})

        @contextlib.contextmanager
        def tracking_on(self) -> Iterator[None]:
            self.tracking = True
            try:
                yield
            finally:
                self.tracking = False

    return _SimulationFakeMode


def _handed_key(mode: Any, base: Any, state: Any, func: Any, args: Any, kwargs: Any) -> Any:
    """FakeTensorMode's key for a call (``base._cache_key``), or the one _learn made for this very call just before
    (point 2), once; with CHECK_KEYS, checked to be FakeTensorMode's."""
    pending, mode.pending_key = mode.pending_key, None
    if pending is None or pending[0] is not func or pending[1] is not args or (
            pending[2] is not kwargs and (pending[2] or kwargs)):  # FakeTensorMode gives {} for no kwargs
        return base._cache_key(mode, state, func, args, kwargs)
    if CHECK_KEYS and base._cache_key(mode, state, func, args, kwargs) != pending[3]:
        raise AssertionError(f"{func}: the key made before the call is not FakeTensorMode's")
    return pending[3]


def _dispatch(mode: Any, base: Any, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
    """FakeTensorMode's dispatch (``base.dispatch``), with a call whose key was learnt answered from its entry (the
    attribute queries of _DISPATCH_META_HANDLERS never get here: __torch_dispatch__ answers them first)."""
    found = _torch()
    fake_tensor = found.fake_tensor
    if func is found.unsafe_view:  # FakeTensorMode runs it as a view (point 3), and caches a view
        func = found.view
    elif func is found.item and fake_hits.constant_item(mode, args, kwargs, found):  # point 6
        return fake_hits.item(mode, base, func, types, args, kwargs, found, CHECK_KEYS)
    if (func in fake_tensor._DISPATCH_HANDLE_DIRECTLY or not mode.cache_enabled or mode.cache_crosscheck_enabled
            or mode.shape_env is not None):
        return base.dispatch(mode, func, types, args, kwargs)
    key = call_key(mode, func, args, kwargs)
    learnt = None if key is None else LEARNT.get(key)
    if key is None or learnt is SKIP:
        return base.dispatch(mode, func, types, args, kwargs)
    state = fake_tensor._CacheKeyState(mode.shape_env)
    if learnt is None:
        return _learn(mode, base, state, key, func, types, args, kwargs)
    if learnt[0] == FRESH:
        return _fresh_outputs(mode, base, learnt[1], func, types, args, kwargs)
    cache_key, entry = learnt
    if CHECK_KEYS and mode._cache_key(state, func, args, kwargs) != cache_key:
        raise AssertionError(f"{func}: a call with a learnt key has another FakeTensorMode key")
    base.cache_hits += 1
    return fake_hits.output(mode, state, entry, cache_key, func, args, found, CHECK_KEYS)  # point 7


def _learn(mode: Any, base: Any, state: Any, key: tuple[Any, ...], func: Any, types: Any, args: Any,
           kwargs: Any) -> Any:
    """FakeTensorMode's dispatch of a call not seen before, its entry learnt where it cached one, else (for the
    operators of point 4) the call's new outputs where it made only such."""
    fake_tensor = _torch().fake_tensor

    try:
        cache_key = mode._cache_key(state, func, args, kwargs)  # before the call, which may change its arguments
    except fake_tensor._BypassDispatchCache:
        cache_key = None
    mode.pending_key = None if cache_key is None else (func, args, kwargs, cache_key)  # not made twice
    try:
        out = base.dispatch(mode, func, types, args, kwargs)
    finally:
        mode.pending_key = None
    entry = None if cache_key is None else base.cache.get(cache_key)
    if isinstance(entry, fake_tensor._DispatchCacheValidEntry) and not state.known_symbols:
        LEARNT[key] = (cache_key, entry)
        return out
    fresh = (func.namespace in FRESH_NAMESPACES or func.name().startswith(FRESH_PREFIX)) and not func._schema.is_mutable
    specs = _specs(mode, base, out, args, kwargs) if fresh else None
    LEARNT[key] = SKIP if specs is None else (FRESH, specs)
    return out


FRESH = "new tensors"  # LEARNT's mark of an operator's learnt new outputs (point 4)
Spec = tuple[Any, Any, Any, Any]  # a new output's sizes, strides, dtype and device


def _specs(mode: Any, base: Any, out: Any, args: Any, kwargs: Any) -> tuple[type, tuple[Spec, ...]] | None:
    """What an operator returned (a tensor, a tuple or a list), and each output's spec, where every output is a new
    tensor that empty_strided of its spec makes alike (its storage's bytes, at offset 0), on no argument's storage;
    None where any is not, or it returned another kind of sequence (torch.return_types)."""
    found = _torch()
    if isinstance(out, (tuple, list)) and type(out) not in (tuple, list):
        return None
    outputs = out if isinstance(out, (tuple, list)) else (out,)
    taken = {id(leaf.untyped_storage()) for leaf in found.leaves((args, kwargs)) if isinstance(leaf, found.FakeTensor)}
    specs = []
    for tensor in outputs:
        if (not isinstance(tensor, found.FakeTensor) or tensor.fake_mode is not mode or tensor.constant is not None
                or tensor.requires_grad or tensor.is_conj() or tensor.is_neg() or tensor.layout != found.torch.strided
                or tensor.storage_offset() != 0 or id(tensor.untyped_storage()) in taken):
            return None
        taken.add(id(tensor.untyped_storage()))  # two outputs on one storage are not new tensors each
        spec = (tuple(tensor.shape), tensor.stride(), tensor.dtype, tensor.device)
        if _made(mode, base, spec).untyped_storage().nbytes() != tensor.untyped_storage().nbytes():
            return None
        specs.append(spec)
    return type(out), tuple(specs)


def _made(mode: Any, base: Any, spec: Spec) -> Any:
    """A new fake tensor of a spec, by empty_strided (answered from FakeTensorMode's cache once learnt)."""
    shape, stride, dtype, device = spec
    return _dispatch(mode, base, _torch().empty_strided, (), (shape, stride), {"dtype": dtype, "device": device})


def _fresh_outputs(mode: Any, base: Any, learnt: tuple[type, tuple[Spec, ...]], func: Any, types: Any, args: Any,
                   kwargs: Any) -> Any:
    """A learnt operator's new outputs, made from their specs; with CHECK_KEYS, the call is run too and its
    outputs must have those specs."""
    returned, specs = learnt
    if CHECK_KEYS and _specs(mode, base, base.dispatch(mode, func, types, args, kwargs), args, kwargs) != learnt:
        raise AssertionError(f"{func}: a call with a learnt key made other tensors")
    outputs = tuple(_made(mode, base, spec) for spec in specs)
    return returned(outputs) if returned in (tuple, list) else outputs[0]
