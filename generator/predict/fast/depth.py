"""The depth fast path: a decoder stack repeats, so the trace of a deep model is the trace of a shallow one
with one layer's entries repeated. A row is simulated at four small depths (a, a+1, a+2, a+3 layers), and the
journal of the full depth is written from them (tracker.py's entries: made, kind, freed, phase):

1. the entries of depth a+1 that depth a lacks are found as runs inserted into it (greedily, where the two
   journals part, the shortest run after which they agree again for 64 entries, else 32, 16 or 8, as the
   next run allows; where that reads no shape, as difflib's SequenceMatcher aligns them, longest matching
   blocks first, which finds runs that follow each other more closely than 8 entries);
2. depth a with each run repeated twice must be depth a+2, entry for entry, and three times depth a+3. A run
   may be several inserted at one place, which depth a+2 shows as each piece repeated in turn (an optimizer's
   foreach update makes every parameter's temporaries, then frees them in reverse: one layer's made entries
   and frees are back to back in depth a+1, and nest in depth a+2); such a run is split where depth a+2
   needs it (inserted_runs.py);
3. an entry that names a storage (its kind, its free) names one made in a copy of a run a fixed step from its
   own (up to two, forward or backward through the copies, as backward walks the layers in reverse), the first
   or the last copy, or where that step leaves the copies a storage outside the runs: the rule is read off
   depth a+3 and must give every name in depth a+2.

Only then is the full depth written, with each run repeated (layers - a) times, and replayed. Where any check
fails (a stack whose layers are not all alike, a trace that does not repeat) there is no fast answer and the
caller simulates the full depth. The answers are the full simulation's, byte for byte, on every architecture
and set-up tests/test_depth.py runs.

What steps 1 to 3 find is the stack's shape (``shape``). A batch only changes the sizes of a trace, so another
batch of the same row needs only depth a+1 (``extend_like``): where its entries name storages as the shape's
depth a+1 did, depth a is it without the runs (as the aligner found depth a to be where the shape was read), and
the full depth is written with the shape's rules; where they differ, there is no answer from the shape and the
caller reads the shape at this batch: from three depths (a to a+2) where the stack was seen to repeat three times
at the other batch (``shape``), else four."""

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from generator.predict.fast.inserted_runs import ALIGNERS, Run, Token, find_runs, split_runs

Journal = Sequence[tuple[Any, ...]]  # a tracker's entries (tracker.py)
Label = tuple[Any, ...]  # ("b", index in depth a) | ("r", run, copy, offset in the run)
Stretch = tuple[int | None, int, range]  # (None, 0, indices in depth a) | (run, copy, offsets in the run)


def _tokens(journal: Sequence[tuple[Any, ...]]) -> tuple[list[Token], list[int | None]]:
    """Each entry without its storage key, and the serial number of the made entry it names (None for made
    and phase entries)."""
    serial: dict[object, int] = {}
    sizes: dict[int, int] = {}
    tokens: list[Token] = []
    names: list[int | None] = []
    for entry in journal:
        if entry[0] == "made":
            serial[entry[1]] = len(tokens)
            sizes[len(tokens)] = entry[2]
            tokens.append(("made", entry[2], entry[3]))
            names.append(None)
        elif entry[0] == "phase":
            tokens.append(entry)
            names.append(None)
        else:
            made = serial.pop(entry[1]) if entry[0] == "freed" else serial[entry[1]]
            tokens.append((entry[0], sizes[made], *entry[2:]))
            names.append(made)
    return tokens, names


def _stretches(base_length: int, runs: list[tuple[int, int, int]], copies: int) -> Iterator[Stretch]:
    """The extended journal's order, a stretch at a time: (None, 0, depth a's indices), or (a run, a copy, the
    run's offsets) for each copy where depth a+1 inserts the run."""
    done = 0
    for number, (where, start, end) in enumerate(runs):
        yield None, 0, range(done, where)
        for copy in range(copies):
            yield number, copy, range(end - start)
        done = where
    yield None, 0, range(done, base_length)


def _labels(base_length: int, runs: list[tuple[int, int, int]], copies: int) -> list[Label]:
    """Where each entry of the extended journal comes from: depth a's entry, or a run's copy's entry."""
    return [("b", index) if run is None else ("r", run, copy, index)
            for run, copy, indices in _stretches(base_length, runs, copies) for index in indices]


# How an entry of copy c names a storage made in copy c' of a run (of n copies): forward through the copies
# (c' = c + shift) or backward (c' = n - 1 - c + shift, as backward walks the layers in reverse), else the first
# or the last copy. A c' before the first copy or past the last names a storage outside the runs, one per place.
WAYS = (*((way, shift) for shift in (0, -1, 1, -2, 2) for way in ("same", "reverse")), ("first", 0), ("last", 0))


def _copy(way: tuple[str, int], copy: int, copies: int) -> int:
    name, shift = way  # asked for every naming entry of a full depth's journal: no dict of the four made each time
    if name == "same":
        return copy + shift
    if name == "reverse":
        return copies - 1 - copy + shift
    return 0 if name == "first" else copies - 1


def _rules(labels: list[Label], names: list[int | None], copies: int) -> dict[Label, tuple[Any, ...]] | None:
    """For each naming entry of the runs and of depth a (by its label without the copy), the rule that gives
    the label of the storage it names, read off a journal with ``copies`` copies of each run."""
    seen: dict[Label, dict[int, Label]] = {}
    for label, name in zip(labels, names, strict=True):
        if name is not None:
            key = label if label[0] == "b" else ("r", label[1], label[3])
            seen.setdefault(key, {})[label[2] if label[0] == "r" else 0] = labels[name]
    rules = {}
    for key, targets in seen.items():
        rule = _rule(targets, copies)
        if rule is None:
            return None
        rules[key] = rule
    return rules


def _rule(targets: dict[int, Label], copies: int) -> tuple[Any, ...] | None:
    """The first way that gives every copy's target, with the storages it names outside the runs."""
    named = set(targets.values())
    if len(named) == 1 and next(iter(named))[0] == "b":
        return next(iter(named))
    runs = {(target[1], target[3]) for target in named if target[0] == "r"}
    if len(runs) != 1:
        return None
    run, offset = runs.pop()
    for way in WAYS:
        outside: dict[int, Label] = {}
        for copy, target in targets.items():
            index = _copy(way, copy, copies)
            if 0 <= index < copies:
                if target != ("r", run, index, offset):
                    break
            elif target[0] != "b" or outside.setdefault(index if index < 0 else index - copies, target) != target:
                break
        else:
            return ("r", run, offset, way, tuple(sorted(outside.items())))
    return None


def _journal(base: list[Token], longer: list[Token], runs: list[tuple[int, int, int]],
             rules: dict[Label, tuple[Any, ...]], copies: int) -> list[tuple[Any, ...]] | None:
    """The extended journal (depth a with each run repeated ``copies`` times, in _stretches' order), each storage
    keyed by its made entry's place; None where a rule names a storage that is not live. Storages are numbered by
    their labels' places in that order (_Numbering), and each entry's rule is looked up once for depth a and once
    a run's offset, not for every copy: a deep model's journal has a hundred thousand entries."""
    numbering = _Numbering([end - start for _, start, end in runs], len(base), copies)
    base_rules = [rules.get(("b", index)) for index in range(len(base))]
    run_tokens = [longer[start:end] for _, start, end in runs]
    run_rules = [[rules.get(("r", run, offset)) for offset in range(end - start)]
                 for run, (_, start, end) in enumerate(runs)]
    keys: dict[int, int] = {}  # a live storage's number -> its key
    journal: list[tuple[Any, ...]] = []
    for run, copy, indices in _stretches(len(base), runs, copies):
        if run is None:
            tokens, stretch_rules, first = base, base_rules[indices.start:indices.stop], 0
        else:
            tokens, stretch_rules, first = run_tokens[run], run_rules[run], numbering.first(run, copy)
        if not _extend(journal, keys, tokens, indices, stretch_rules, copy, first, numbering):
            return None
    return journal


class _Numbering:
    """How _journal numbers the extended journal's labels: depth a's entry k is k; then each run, copy by copy."""

    def __init__(self, lengths: list[int], base_length: int, copies: int) -> None:
        self.lengths, self.copies, self.firsts = lengths, copies, [base_length]
        for length in lengths:
            self.firsts.append(self.firsts[-1] + copies * length)

    def first(self, run: int, copy: int) -> int:
        return self.firsts[run] + copy * self.lengths[run]

    def target(self, rule: tuple[Any, ...], copy: int) -> int | None:
        """The number of the storage a naming entry of this copy names by its rule (of depth a, of a run's copy by
        _copy, or the one outside the copies where that leaves them); None where the rule does not say."""
        if rule[0] == "b":
            return rule[1]
        _, run, offset, way, outside = rule
        index = _copy(way, copy, self.copies)
        if 0 <= index < self.copies:
            return self.first(run, index) + offset
        found = dict(outside).get(index if index < 0 else index - self.copies)
        return None if found is None else found[1]


def _extend(journal: list[tuple[Any, ...]], keys: dict[int, int], tokens: list[Token], indices: range,
            rules: list[tuple[Any, ...] | None], copy: int, first: int, numbering: _Numbering) -> bool:
    """Append one stretch of the extended journal: depth a's entries ``indices`` (``first`` 0), or one copy of a
    run (``tokens`` the run's, ``first`` the number of its first entry), each entry's rule in ``rules``; False
    where a rule names a storage that is not live."""
    target, append, pop, get = numbering.target, journal.append, keys.pop, keys.get  # each entry's calls, once
    for index, rule in zip(indices, rules, strict=True):
        token = tokens[index]
        tag = token[0]
        if tag == "made":
            keys[first + index] = place = len(journal)
            append(("made", place, *token[1:]))
            continue
        if tag == "phase":
            append(token)
            continue
        named = None if rule is None else target(rule, copy)
        named = None if named is None else (pop(named, None) if tag == "freed" else get(named))
        if named is None:
            return False
        append((tag, named, *token[2:]))
    return True


def _repeated(base: list[Token], longer: list[Token], runs: list[tuple[int, int, int]], tokens: list[Token],
              copies: int) -> bool:
    """Whether ``tokens`` are depth a's with each run repeated ``copies`` times."""
    return [base[index] if run is None else longer[runs[run][1] + index]
            for run, _, indices in _stretches(len(base), runs, copies) for index in indices] == tokens


def repeats(journals: Sequence[Journal]) -> bool:
    """Whether depth a+2 is depth a with twice the runs that depth a+1 inserts, as either aligner finds them
    (the first check of extend)."""
    base, longer, two = (_tokens(journal)[0] for journal in journals)
    return any(split_runs(base, longer, two, find_runs(base, longer, aligner)) for aligner in ALIGNERS)


@dataclass(frozen=True)
class Shape:
    """How a stack's trace repeats, read off depths a to a+3 of one row at one batch: the runs that depth a+1
    inserts into depth a (as the ``aligner`` finds them, ``found``; split as depth a+2 repeats them, ``runs``),
    the rule by which each naming entry names its storage, and which made entry each naming entry of depth a+1
    names (another batch's must name the same for the shape to serve it)."""

    names: tuple[int | None, ...]
    runs: tuple[Run, ...]
    rules: dict[Label, tuple[Any, ...]]
    aligner: str
    found: tuple[Run, ...]


def shape(journals: Sequence[Journal]) -> Shape | None:
    """The shape of the journals at depths a to a+3, by the first aligner that reads one; None where they do
    not repeat. Given depths a to a+2 only (a row whose stack was seen to repeat three times at another batch:
    small_depths.py), the rules are read off depth a+2 and checked against depth a+1: two copies tell every way
    in WAYS apart where a copy names a storage in the runs; where an entry of the runs names only storages
    outside them (``_rule`` finds no way, or ``_outside_only``: one storage, which a third copy could show to be
    the one two copies back), there is no shape from three depths and the caller runs the fourth."""
    tokens = [_tokens(journal) for journal in journals]
    return next((found for aligner in ALIGNERS if (found := _shape(tokens, aligner)) is not None), None)


def _shape(tokens: list[tuple[list[Token], list[int | None]]], aligner: str) -> Shape | None:
    (base, _), (longer, longer_names), (two, _) = tokens[:3]
    copies = len(tokens) - 1  # of each run in the deepest journal: 3, or 2
    deepest, deepest_names = tokens[-1]
    found = find_runs(base, longer, aligner)
    runs = split_runs(base, longer, two, found)
    if not runs or (copies == 3 and not _repeated(base, longer, runs, deepest, 3)):
        return None
    rules = _rules(_labels(len(base), runs, copies), deepest_names, copies)
    if rules is None or (copies == 2 and _outside_only(rules)):
        return None
    check = _journal(base, longer, runs, rules, copies - 1)
    if check is None or _tokens(check)[1] != tokens[copies - 1][1]:
        return None
    return Shape(tuple(longer_names), tuple(runs), rules, aligner, tuple(found or ()))


def _outside_only(rules: dict[Label, tuple[Any, ...]]) -> bool:
    """Whether an entry of the runs names one storage outside them in both of two copies: a storage of depth a
    each copy names, or each copy the one two copies before it (a third copy tells them apart), so three depths
    do not decide it."""
    return any(key[0] == "r" and rule[0] == "b" for key, rule in rules.items())


def extend(journals: Sequence[Journal], copies: int) -> list[tuple[Any, ...]] | None:
    """The journal at depth a + copies, from the journals at depths a to a+3; None where they do not repeat."""
    found = shape(journals)
    return None if found is None else extend_like(found, journals[1], copies)


def extend_like(found: Shape, journal: Journal, copies: int) -> list[tuple[Any, ...]] | None:
    """The journal at depth a + copies from depth a+1 of any batch, by a shape read at one batch: depth a is
    depth a+1 without the shape's runs (as the aligner found them where the shape was read); None where depth
    a+1's entries name other storages than the shape's."""
    longer, names = _tokens(journal)
    if tuple(names) != found.names:
        return None
    cut = {index for _, start, end in found.runs for index in range(start, end)}
    base = [token for index, token in enumerate(longer) if index not in cut]
    return _journal(base, longer, list(found.runs), found.rules, copies)


def arithmetic(values: Sequence[int], copies: int) -> int | None:
    """The value at a + copies of a figure that grows by the same step at each depth, None where it does not."""
    steps = {b - a for a, b in pairwise(values)}
    return values[0] + copies * steps.pop() if len(steps) == 1 else None
