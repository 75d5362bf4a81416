"""The batch fast path: a row's trace at one batch is its trace at another with other sizes. Past batch 1 (where
a dimension of one takes other paths: a copy skipped, a view kept), the same storages are made, named and freed in
the same order at every batch, and each one's bytes are affine in the batch (its tensor's shape has the batch as
one factor, or none). fit's search and the site's curves ask one row at many batches, so (``along``):

1. the first two batches of 2 or more that a row is asked at are simulated, and their journals kept;
2. asked a third, the line through those two is read: every entry alike but a storage's bytes, and each storage's
   bytes a whole number of bytes more for each sequence of the batch;
3. the far batch (the largest the tool allows at the row's length) is simulated, and must lie on that line, entry
   for entry and byte for byte, with the model's counts unchanged.

Only then is the journal at any batch from the first checked to the far one written from the line and replayed
(tracker.py). Where any check fails there is no line, and each batch is simulated. The answers are the
simulation's, byte for byte, on every architecture and set-up tests/test_batches.py runs."""

from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from generator.predict import decode
from generator.predict.tracker import StorageTracker

Entry = tuple[Any, ...]  # a tracker's journal entry (tracker.py)
Simulated = tuple[StorageTracker, Any, bool]  # a run's tracker, the model's counts, whether experts were rerouted
KEPT = 4  # the rows whose points and lines a process keeps: fit's search and a curve ask one row per program


def indexed(journal: Sequence[Entry]) -> list[Entry]:
    """The journal with every storage keyed by the index of the entry that made it (a run's keys are its storages'
    ids, which another run does not share, and which are reused): decode.py's naming, then its keying. Storages
    freed one after another are put in the order they were made: the CPU's autocast frees its cast copies from a
    hash map keyed by address, so two runs of one row free them in different orders. No figure depends on that
    order (a tracker's peaks and split, one card's share, the caching allocator's blocks once all are freed)."""
    keyed = decode.keyed(decode.indexed(journal))
    if keyed is None:
        raise ValueError("a journal names a storage that is not live")  # a tracker writes no such entry
    settled: list[Entry] = []
    for freeing, run in groupby(keyed, key=lambda entry: entry[0] == "freed"):
        entries = list(run)
        settled.extend(sorted(entries) if freeing else entries)
    return settled


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
    else simulated (``simulate(batch)``); asked a third batch of 2 to ``far``, the line is read (the module's steps
    2 and 3)."""
    known = ROWS.setdefault(key, _Row())
    ROWS.move_to_end(key)
    while len(ROWS) > KEPT:
        ROWS.popitem(last=False)
    if known.line is not None and known.line.first <= batch <= known.line.last:
        return StorageTracker.replay(at(known.line, batch)), known.line.facts, known.line.rerouted
    if not 2 <= batch <= far or known.failed or known.line is not None or batch in (p[0] for p in known.points):
        return simulate(batch)
    if len(known.points) < 2:
        found = simulate(batch)
        known.points.append((batch, found[0].journal, found[1], found[2]))
        return found
    return _read_line(known, batch, far, simulate)


def _read_line(known: _Row, batch: int, far: int, simulate: Callable[[int], Simulated]) -> Simulated:
    """The line through the row's two points, checked at the far batch; the batch asked from it, else simulated."""
    (one, early, facts, rerouted), (two, late, *counts) = sorted(known.points, key=lambda point: point[0])
    points, known.points = [(one, indexed(early)), (two, indexed(late))], []
    steps = through(*points)
    found = simulate(far)
    alike = tuple(counts) == (facts, rerouted) == found[1:]
    line = None if steps is None or not alike else Line(one, far, tuple(points[0][1]), steps, facts, rerouted)
    if line is None or indexed(found[0].journal) != at(line, far):
        known.failed = True
        return found if batch == far else simulate(batch)
    known.line = line
    return found if batch == far else (StorageTracker.replay(at(line, batch)), facts, rerouted)
