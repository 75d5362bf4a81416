"""Two of FakeTensorMode's answers that the simulation's mode (fake_mode.py) makes directly, as FakeTensorMode makes
them but without the general path around them, each checked against FakeTensorMode's own where the caller asks
(``check``: fake_mode.CHECK_KEYS, on in the tests):

6. **A constant's value** (``item``). AdamW reads each parameter's step counter, a tensor that holds a constant,
   twice a step (``.item()``). FakeTensorMode's cache refuses a tensor with a constant, so each read took its whole
   slow path (8 % of a training run) to constant propagation, which runs the operator on the constant outside
   every mode: what ``item`` does.
7. **A learnt entry's output** (``output``). A hit in FakeTensorMode's cache makes its output with a meta tensor of
   the entry's metadata, inside a context manager written as a generator, with each size checked for a symbolic
   one, and wraps it in a FakeTensor: over a third of a LoRA run's time. For the common entry (one tensor, new or
   a view of an argument's storage, of plain metadata, and no symbolic size, as the simulation has no ShapeEnv),
   the same meta tensor is made outside every mode by PyTorch's own guard, and wrapped as FakeTensor's
   constructor wraps it (``_wrapped``); any other entry is answered by FakeTensorMode's code. The check compares
   each output's metadata, dispatch keys, storage and attributes with FakeTensorMode's own."""

from typing import Any


def output(mode: Any, state: Any, entry: Any, cache_key: Any, func: Any, args: Any, found: Any, check: bool) -> Any:
    """A learnt entry's output, as a hit in FakeTensorMode's cache makes it (``_output_from_cache_entry``), the
    common kind made directly (point 7): one new tensor, or a view of an argument's storage, of plain metadata;
    with ``check``, FakeTensorMode's own output must have the same metadata, storage and attributes."""
    info = entry.output_infos[0]
    made = info.metadata
    if (entry.is_output_tuple or info.inplace_idx is not None or made is None or made.is_conj or made.is_neg
            or made.layout is not found.torch.strided):
        return mode._output_from_cache_entry(state, entry, cache_key, func, args)
    out = _made_directly(mode, made, args[info.view_idx] if func.is_view else None, found)
    if check:
        plain = mode._output_from_cache_entry(state, entry, cache_key, func, args)
        if _described(out, func, found) != _described(plain, func, found) or vars(out) != vars(plain):
            raise AssertionError(f"{func}: a learnt entry's output made directly is not FakeTensorMode's")
    return out


def _made_directly(mode: Any, made: Any, viewed: Any, found: Any) -> Any:
    """A fake tensor of an entry's metadata, made as FakeTensorMode makes it from a hit: a meta tensor of those
    sizes and strides (on the storage of the argument a view views), wrapped with the fake device."""
    torch = found.torch
    with torch._C._DisableTorchDispatch():  # the meta tensor is made outside every mode, as in FakeTensorMode
        empty = torch.empty_strided(made.shape, made.stride, dtype=made.dtype, layout=made.layout, device="meta",
                                    requires_grad=made.requires_grad)
        if viewed is not None:
            empty.set_(viewed.untyped_storage(), made.storage_offset, made.shape, made.stride)
    return _wrapped(mode, empty, made.device, found)


def _wrapped(mode: Any, empty: Any, device: Any, found: Any) -> Any:
    """``FakeTensor(mode, empty, device)``, as its constructor makes it. The first one a mode makes is the
    constructor's, and the attributes the constructor gave it (the mode, the device, and no constant or memo) are
    given to each next one; the tensor itself is made by the constructor's own call, with the same guard on its
    data pointer. Six microseconds an output fewer: the constructor checks its arguments and sets each memo
    through a descriptor."""
    if mode.made_attributes is None:
        out = found.FakeTensor(mode, empty, device)
        mode.made_attributes = dict(vars(out))
        return out
    torch = found.torch
    out = torch.Tensor._make_subclass(found.FakeTensor, empty, empty.requires_grad, dispatch_device=True,
                                      device_for_backend_keys=device)
    if mode._allow_unsafe_data_ptr_access:
        torch._C._set_warn_deprecated_on_mutable_data_ptr(out)
    else:
        torch._C._set_throw_on_mutable_data_ptr(out)
    vars(out).update(mode.made_attributes)
    out.fake_device = device  # normalized as the constructor does it
    return out


def _described(tensor: Any, func: Any, found: Any) -> tuple[Any, ...]:
    """What a check compares of an output: its metadata and dispatch keys, and for a view the storage it is on."""
    return (type(tensor), tensor.shape, tensor.stride(), tensor.storage_offset(), tensor.dtype, tensor.device,
            tensor.requires_grad, tensor.is_leaf, tensor.untyped_storage().nbytes(),
            tensor.untyped_storage()._cdata if func.is_view else None, str(found.torch._C._dispatch_keys(tensor)))


def constant_item(mode: Any, args: Any, kwargs: Any, found: Any) -> bool:
    """Whether a call of ``_local_scalar_dense`` reads the value of one of this mode's tensors that holds a constant
    (point 6)."""
    tensor = args[0] if len(args) == 1 and not kwargs else None
    return (isinstance(tensor, found.FakeTensor) and tensor.fake_mode is mode and tensor.constant is not None
            and mode.shape_env is None and not tensor._has_symbolic_sizes_strides)


def item(mode: Any, base: Any, func: Any, types: Any, args: Any, kwargs: Any, found: Any, check: bool) -> Any:
    """A constant tensor's value, as FakeTensorMode's constant propagation reads it: the operator run on the
    constant, outside any mode (point 6); with ``check``, FakeTensorMode's own answer must be the same."""
    value = _constant_value(func, args[0], found)
    if check:
        plain = base.dispatch(mode, func, types, args, kwargs)
        if type(plain) is not type(value) or (plain != value and value == value):  # NaN is NaN's value too
            raise AssertionError(f"{func}: a constant's value read directly is not FakeTensorMode's")
    return value


def _constant_value(func: Any, tensor: Any, found: Any) -> Any:
    """The operator run on the constant a fake tensor holds, outside every mode, as FakeTensorMode propagates it."""
    with found.no_dispatch():
        return func(tensor.constant)
