"""One card's share of a sharded training row, from the simulation's own trace.

The simulation follows every storage from birth to free and learns what each one is (a weight, a gradient,
optimizer state, or activations and temporaries). A sharded row (``-zero3x8``) replays that trace with each
storage of a sharded kind at its share, ceil(bytes / cards), as a card holds it:

- DDP shards nothing; ZeRO-1 the optimizer state; ZeRO-2 also the gradients; ZeRO-3 and FSDP also the weights;
- a card's activations are those of its own batch (the row's batch is each card's), which the trace already is;
- ZeRO-3 and FSDP gather a unit's full weights before computing it. The units are the decoder layers (the
  largest ModuleList) and the root, which holds the rest (embeddings, head, final norm). A card is allowed the
  two largest units in full for the whole run: the one computing and the one prefetched;
- where gradients are sharded (ZeRO-2, ZeRO-3, FSDP), a unit's gradients are made whole by its backward and
  only then reduce-scattered to their shards: a card is allowed the largest unit's gradients in full for the
  whole run, beside the shards.

This is a model of what the frameworks do, computed exactly from the simulated storages; it is not measured,
and none of it has met a device. Collectives' own buffers (NCCL's, DDP's gradient buckets) are not in it."""

from dataclasses import dataclass, field
from typing import Any

from generator.categories import CATEGORIES
from generator.matrix import RowSpec

METHOD = ("sharded kinds at ceil(bytes / cards), the two largest units' weights gathered whole and the largest "
          "unit's gradients whole before their reduce-scatter, throughout")


@dataclass
class CardTrace:
    """A card's bytes over the trace: its peak, the phase and split at the peak, per-phase peaks, and the trace
    itself at the card's sizes, for the CUDA allocator's replay."""

    peak: int = 0
    phase: str = "load"
    split: dict[str, int] = field(default_factory=lambda: dict.fromkeys(CATEGORIES, 0))
    phase_peaks: dict[str, int] = field(default_factory=dict)
    events: list[tuple[object, int, bool]] = field(default_factory=list)


def share(size: int, kind: str, row: RowSpec) -> int:
    """A card's bytes of a storage of this kind: ceil(size / cards) where the row shards the kind."""
    return -(-size // row.gpus) if kind in row.sharded_kinds else size


def per_card(tracker: Any, row: RowSpec, whole: dict[str, int] | None = None) -> CardTrace:
    """Replay the tracker's trace (StorageTracker in simulate.py) at one card's sizes, with ``whole`` bytes of
    each kind held in full throughout (gathered weights, gradients before their reduce-scatter: whole_units).
    For an unsharded row it reproduces the tracker's own figures."""
    card, live = CardTrace(), {}
    whole = {kind: held for kind, held in (whole or {}).items() if held}
    totals = {**dict.fromkeys(CATEGORIES, 0), **whole}
    total = phase_max = sum(whole.values())
    card.events.extend((f"whole {kind}", held, True) for kind, held in whole.items())
    marks, next_mark, phase = list(tracker.phase_marks), 0, "load"
    for index, (key, size, made) in enumerate(tracker.events):
        while next_mark < len(marks) and marks[next_mark][0] <= index:
            card.phase_peaks[phase], phase, phase_max = phase_max, marks[next_mark][1], total
            next_mark += 1
        if made:
            kind = tracker.event_kinds[index]
            live[key] = (share(size, kind, row), kind)
        held, kind = live[key] if made else live.pop(key)
        totals[kind] += held if made else -held
        total += held if made else -held
        card.events.append((key, held, made))
        phase_max = max(phase_max, total)
        if total > card.peak:
            card.peak, card.phase, card.split = total, phase, dict(totals)
    for _, later in marks[next_mark:]:  # phases entered after the last event
        card.phase_peaks[phase], phase, phase_max = phase_max, later, total
    card.phase_peaks[phase] = phase_max
    return card


def whole_units(model: Any, row: RowSpec) -> dict[str, int]:
    """What a card holds in full beside its shards: under ZeRO-3 or FSDP the weights of its two largest units
    (the decoder layers, and the root that holds the rest); where gradients are sharded, the gradients of its
    largest unit, made whole by backward before their reduce-scatter. Nothing for what is not sharded."""
    def weights(unit: list[Any]) -> int:  # as stored: a 4-bit layer's packed storage
        return sum(p.untyped_storage().nbytes() for p in {id(p): p for p in unit}.values())

    def gradients(unit: list[Any]) -> int:  # one of the parameter's own dtype for each trainable parameter
        return sum(p.numel() * p.element_size() for p in {id(p): p for p in unit if p.requires_grad}.values())

    layers = _wrapped_units(model)
    inside = {id(p) for layer in layers for p in layer.parameters()}
    units = [list(layer.parameters()) for layer in layers] + [[p for p in model.parameters() if id(p) not in inside]]
    found = {}
    if "weights" in row.sharded_kinds:
        found["weights"] = sum(sorted(weights(unit) for unit in units)[-2:])
    if "gradients" in row.sharded_kinds:
        found["gradients"] = max(gradients(unit) for unit in units)
    return found


def _wrapped_units(model: Any) -> list[Any]:
    """The decoder layers, as FSDP's auto-wrap policy finds them: the modules of the classes transformers names
    in the model's _no_split_modules (else those of the longest ModuleList), outermost only."""
    import torch

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    names = set(getattr(base, "_no_split_modules", None) or ())
    found = [m for m in model.modules() if type(m).__name__ in names]
    if not found:
        lists: list[list[Any]] = [list(m) for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
        found = max(lists, key=len) if lists else []
    inner = {id(sub) for m in found for sub in m.modules() if sub is not m}
    return [m for m in found if id(m) not in inner]
