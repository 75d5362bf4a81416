"""What the depth fast path (small_depths.py, depth.py) must know of a model's decoder layers before it trusts a
few of them for all: the small depths show only the first layers, and a layer the trace never met (a dense MLP
among experts, ``mlp_only_layers``; an attention layer among Mamba ones; a global layer among sliding ones whose
KV cache keeps the whole prompt) would be extrapolated as one it did meet, silently. So each layer has a signature (its
modules' classes and plain attributes but its index, its parameters' shapes and dtypes, its entries of the
config's per-layer lists, and which of its modules LoRA targets given by their path pick, as in
``--lora-targets layers.20.mlp.down_proj``), read from the model built on the meta device (no memory, no
simulation), and:

- ``repeats_past``: the small depths from layer ``first`` stand for the full depth only where the layers they
  add (``first`` to ``first`` + 2) are the full model's, and every layer past them is like one of those. Layers of
  two kinds the traces met (Gemma 2's alternating sliding and global layers, alike at a length within the window)
  are fine: the trace checks of depth.py find whether they repeat;
- ``uniform_from``: the first layer from which every layer is alike, where a stack begins with other layers
  (DeepSeek's first dense layers, ``first_k_dense_replace``): the small depths can start there;
- ``periods``: for a stack whose layers repeat in a period of several (Gemma 3's five sliding layers and a
  global one; an MoE layer every other one), that period: the small depths can step a period at a time."""

from functools import lru_cache
from typing import Any

from generator.model_source import ModelError, ModelSource, load_config, meta_model

# a layer's own index, under the names transformers' layers keep it: the one attribute allowed to differ
INDEX_ATTRIBUTES = frozenset({"layer_idx", "layer_id", "layer_index", "layer_number", "block_idx", "idx"})
PLAIN = (bool, int, float, str, type(None))
MAX_PERIOD = 8  # the longest period in layers the small depths read (four of them span three periods)
Signature = tuple[Any, ...]


def cut_config(source: ModelSource, layers: int | None) -> Any:
    """The model's config, or the same config cut to its first ``layers`` decoder layers (with every per-layer
    list cut to match)."""
    config = load_config(source)
    if layers is not None:
        full = config.num_hidden_layers
        for name, value in _per_layer_lists(config, full):
            setattr(config, name, value[:layers])
        config.num_hidden_layers = layers
    return config


def _per_layer_lists(config: Any, layers: int) -> list[tuple[str, list]]:
    return [(name, value) for name, value in sorted(vars(config).items())
            if isinstance(value, list) and len(value) == layers and name != "architectures"]


@lru_cache(maxsize=16)
def signatures(source: ModelSource, layers: int | None = None) -> tuple[Signature, ...] | None:
    """Each decoder layer's signature, of the model cut to ``layers`` (the full model if None); None where the
    model keeps no list of exactly its decoder layers."""
    config = cut_config(source, layers)
    try:
        model = meta_model(source, config)
    except ModelError:  # a config that fake tensors build but the meta device cannot: no signatures, no fast path
        return None
    found = _decoder_layers(model, config.num_hidden_layers)
    if found is None:
        return None
    path, stack = found
    lists = _per_layer_lists(config, config.num_hidden_layers)
    return tuple((_signature(layer), tuple((name, repr(value[index])) for name, value in lists),
                  _adapted(layer, f"{path}.{index}", source.lora_targets))
                 for index, layer in enumerate(stack))


def _decoder_layers(model: Any, layers: int) -> tuple[str, Any] | None:
    """The path and modules of the model's first module list of exactly ``layers`` modules (transformers'
    ``model.layers``, ``transformer.h``), or None."""
    import torch

    return next(((path, module) for path, module in model.named_modules()
                 if isinstance(module, torch.nn.ModuleList) and len(module) == layers), None)


def _adapted(layer: Any, path: str, targets: tuple[str, ...]) -> tuple[str, ...]:
    """The layer's modules that LoRA targets pick by peft's rule (a module's whole path, or the end of it after
    a dot), so that a target naming one layer's module marks that layer apart; () for peft's default targets."""
    if not targets:
        return ()
    return tuple(name for name, _ in layer.named_modules()
                 if any((whole := f"{path}.{name}" if name else path) == target or whole.endswith(f".{target}")
                        for target in targets))


def _signature(layer: Any) -> Signature:
    modules = tuple((name, type(module).__qualname__, _attributes(module)) for name, module in layer.named_modules())
    tensors = tuple((name, tuple(tensor.shape), str(tensor.dtype), tensor.requires_grad)
                    for name, tensor in [*layer.named_parameters(), *layer.named_buffers()])
    return modules, tensors


def _attributes(module: Any) -> tuple[tuple[str, Any], ...]:
    """A module's plain attributes (numbers, strings, flags, and tuples of them), but its index."""
    found = []
    for name, value in sorted(vars(module).items()):
        if name.startswith("_") or name in INDEX_ATTRIBUTES:
            continue
        if isinstance(value, (list, tuple)) and all(isinstance(item, PLAIN) for item in value):
            value = tuple(value)
        elif not isinstance(value, PLAIN):
            continue
        found.append((name, value))
    return tuple(found)


def repeats_past(source: ModelSource, first: int, depths: int, period: int = 1) -> bool:
    """Whether the small depths from ``first``, ``period`` layers apart, stand for the full depth: the layers the
    deepest of them builds are the full model's first ones, and every layer past them is like one the small
    depths add; with a period of several layers, every layer from the second period on is the one a period
    before it (the trace checks compare whole periods, so their order counts)."""
    full, deepest = signatures(source), first + (depths - 1) * period
    small = signatures(source, deepest)
    if full is None or small is None or small != full[:deepest]:
        return False
    if period > 1:  # whole periods on, past a layer of every kind (periods)
        return _periodic(full, first, period)
    added = set(full[first:deepest])
    return all(signature in added for signature in full[deepest:])


def uniform_from(source: ModelSource) -> int | None:
    """The first layer from which every layer of the full model is alike; None where the model keeps no list of
    its layers."""
    full = signatures(source)
    if full is None:
        return None
    start = len(full) - 1
    while start > 0 and full[start - 1] == full[-1]:
        start -= 1
    return start


def periods(source: ModelSource) -> list[tuple[int, int]]:
    """For a stack whose layers past the first are not all alike but repeat in a period of 2 to MAX_PERIOD
    layers (Gemma 3's five sliding and one global; an MoE layer every other one): the shortest such period, with
    the first layer from which the small depths can step it: every layer from one period past it is the one a
    period before it, the layers from it are not all alike (a uniform tail is uniform_from's), the full depth is
    whole periods on, and the layers before it hold one of every kind (a model builds what a kind of layer needs,
    Gemma 3's global mask, once it has one, so every small depth must have it: Gemma 3 at 32 layers starts at
    layer 8, not 6). [] for any other stack."""
    full = signatures(source)
    if full is None or len(set(full[1:])) <= 1:
        return []
    for period in range(2, MAX_PERIOD + 1):
        for first in range(1, len(full) - period):
            if len(set(full[first:])) > 1 and _periodic(full, first, period):
                return [(first, period)]
    return []


def _periodic(full: tuple[Signature, ...], first: int, period: int) -> bool:
    """Whether the small depths can step a period from ``first``: the full depth is whole periods on, the layers
    before ``first`` hold one of every kind, and every layer from the second period on is the one a period
    before it."""
    return (len(full) - first) % period == 0 and set(full[:first]) == set(full) and all(
        full[index] == full[index - period] for index in range(first + period, len(full)))
