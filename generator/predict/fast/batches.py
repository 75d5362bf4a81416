"""The batch fast path: a row's trace at one batch is its trace at another with other sizes. Past batch 1 (where
a dimension of one takes other paths: a copy skipped, a view kept), the same storages are made, named and freed in
the same order at every batch, and each one's bytes are affine in the batch (its tensor's shape has the batch as
one factor, or none). fit's search and the site's curves ask one row at many batches, so (``along``):

1. the first batch of 2 or more that a row is asked at is simulated, and its journal kept;
2. asked a second, of 4 or more, the far batch (the largest the tool allows at the row's length) is simulated, and
   the line through the two is read: every entry alike but a storage's bytes, and each storage's bytes a whole
   number of bytes more for each sequence of the batch;
3. batch 3 (``CHECKED_AT``) is simulated, and must lie on that line, entry for entry and byte for byte, with the
   model's counts unchanged.

Only then is the journal at any batch from the first to the far one written from the line and replayed
(tracker.py). Where any check fails there is no line, and each batch is simulated. A second batch of 3, or the far
one, is simulated and kept instead, and a third is answered by the line through those two, checked at the far
batch. The answers are the simulation's, byte for byte, on every architecture and set-up tests/test_batches.py runs.

Why batch 3 and the far batch: they are the same batches for every set-up at a length, so the operators
FakeTensorMode learns at their sizes (fake_mode.py) serve the other set-ups a process runs. fit's search asks
batches 2 and 3 first (answers/fit.py), so its line is the one through them, checked at the far batch; the site's
curves ask 2, then 4, so theirs is read to the far batch and checked at batch 3. Either way a row costs three
simulations (2, 3 and the far batch), whatever else is asked of it."""

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

from generator.predict.exact.tracker import StorageTracker

Entry = tuple[Any, ...]  # a tracker's journal entry (tracker.py)
Simulated = tuple[StorageTracker, Any, bool]  # a run's tracker, the model's counts, whether experts were rerouted
KEPT = 4  # the rows whose points and lines a process keeps: fit's search and a curve ask one row per program
CHECKED_AT = 3  # the batch at which a line through a row's first batch and its far batch is checked


def indexed(journal: Sequence[Entry]) -> list[Entry]:
    """The journal with every storage keyed by the index of the entry that made it (a run's keys are its storages'
    ids, which another run does not share, and which are reused), in one pass: what decode.py's naming and then its
    keying give. Storages freed one after another are put in the order they were made: the CPU's autocast frees its
    cast copies from a hash map keyed by address, so two runs of one row free them in different orders. No figure
    depends on that order (a tracker's peaks and split, one card's share, the caching allocator's blocks once all
    are freed)."""
    made: dict[object, int] = {}  # a live storage's key -> the index of its made entry
    settled: list[Entry] = []
    freeing: list[Entry] = []  # the freed entries since the last entry of another kind
    try:
        for index, entry in enumerate(journal):
            kind = entry[0]
            if kind == "freed":
                freeing.append(("freed", made.pop(entry[1]), *entry[2:]))
                continue
            if freeing:
                settled += sorted(freeing)
                freeing = []
            if kind == "made":
                made[entry[1]] = index
                settled.append(("made", index, *entry[2:]))
            else:
                settled.append(entry if kind == "phase" else (kind, made[entry[1]], *entry[2:]))
    except KeyError:
        raise ValueError("a journal names a storage that is not live") from None  # a tracker writes no such entry
    return settled + sorted(freeing)


@dataclass(frozen=True)
class Line:
    """A row's journal as a function of the batch: its entries at batch ``first``, with each made entry's bytes
    growing by its own step per sequence; checked from ``first`` to ``last``."""

    first: int
    last: int
    entries: tuple[Entry, ...]  # indexed, at batch ``first``
    steps: dict[int, int]  # a made entry's index -> its bytes per sequence of the batch
    facts: Any
    rerouted: bool


def through(first: tuple[int, list[Entry]], second: tuple[int, list[Entry]]) -> dict[int, int] | None:
    """Each made entry's bytes per sequence, from two indexed journals at two batches; None where the journals
    differ but in a storage's bytes, or a storage's bytes do not grow by a whole number a sequence."""
    (one, early), (two, late) = first, second
    if len(early) != len(late):
        return None
    steps: dict[int, int] = {}
    for index, (a, b) in enumerate(zip(early, late, strict=True)):
        if a[0] == "made" == b[0] and a[3:] == b[3:]:
            step, rest = divmod(b[2] - a[2], two - one)
            if rest:
                return None
            steps[index] = step
        elif a != b:
            return None
    return steps


def at(line: Line, batch: int) -> list[Entry]:
    """The journal at a batch, written from the line."""
    moved, steps = batch - line.first, line.steps
    return [(e[0], e[1], e[2] + steps[i] * moved, *e[3:]) if e[0] == "made" else e for i, e in enumerate(line.entries)]


@dataclass
class _Row:
    """What a process knows of one row across batches: the points simulated so far, the line once read."""

    points: list[tuple[int, list[Entry], Any, bool]] = field(default_factory=list)  # batch, journal, counts, rerouted
    line: Line | None = None
    failed: bool = False


ROWS: "OrderedDict[Hashable, _Row]" = OrderedDict()  # the rows asked most recently in this process, by key


def along(key: Hashable, batch: int, far: int, simulate: Callable[[int], Simulated]) -> Simulated:
    """The row (``key``: it without its batch) at a batch: from its line where one is read and serves the batch,
    else simulated (``simulate(batch)``); asked a second batch of 4 to below ``far``, the line to the far batch is
    read (the module's steps 2 and 3), else asked a third, the line through the two kept."""
    known = ROWS.setdefault(key, _Row())
    ROWS.move_to_end(key)
    while len(ROWS) > KEPT:
        ROWS.popitem(last=False)
    if known.line is not None and known.line.first <= batch <= known.line.last:
        return _from_line(known.line, batch)
    if not 2 <= batch <= far or known.failed or known.line is not None or batch in (p[0] for p in known.points):
        return simulate(batch)
    if len(known.points) == 1 and known.points[0][0] < CHECKED_AT < batch < far:
        return _read_line_to_far(known, batch, far, simulate)
    if len(known.points) < 2:
        found = simulate(batch)
        known.points.append(_point(batch, found))
        return found
    return _read_line(known, batch, far, simulate)


def _from_line(line: Line, batch: int) -> Simulated:
    """The row at a batch, its journal written from the line and replayed, with the counts the line was read with."""
    return StorageTracker.replay(at(line, batch)), line.facts, line.rerouted


def _point(batch: int, found: Simulated) -> tuple[int, list[Entry], Any, bool]:
    return batch, found[0].journal, found[1], found[2]


def _checked(points: list[tuple[int, list[Entry], Any, bool]], check: int, found: Simulated, last: int) -> Line | None:
    """The line through two points, served up to ``last``, where the run at batch ``check`` lies on it and every
    run has the same counts; else None."""
    (one, early, facts, rerouted), (two, late, *counts) = sorted(points, key=lambda point: point[0])
    ends = [(one, indexed(early)), (two, indexed(late))]
    steps = through(*ends)
    alike = tuple(counts) == (facts, rerouted) == found[1:]
    line = None if steps is None or not alike else Line(one, last, tuple(ends[0][1]), steps, facts, rerouted)
    return None if line is None or indexed(found[0].journal) != at(line, check) else line


def _read_line(known: _Row, batch: int, far: int, simulate: Callable[[int], Simulated]) -> Simulated:
    """The line through the row's two points, checked at the far batch; the batch asked from it, else simulated."""
    found = simulate(far)
    line, known.points = _checked(known.points, far, found, far), []
    known.line, known.failed = line, line is None
    if batch == far:
        return found
    return simulate(batch) if line is None else _from_line(line, batch)


def _read_line_to_far(known: _Row, batch: int, far: int, simulate: Callable[[int], Simulated]) -> Simulated:
    """The line through the row's point and its far batch, checked at CHECKED_AT (the module's steps 2 and 3); the
    batch asked from it, else simulated."""
    points, known.points = [known.points[0], _point(far, simulate(far))], []
    line = _checked(points, CHECKED_AT, simulate(CHECKED_AT), far)
    known.line, known.failed = line, line is None
    return simulate(batch) if line is None else _from_line(line, batch)
