"""The decode fast path: generation decodes one token at a time, and each decode step is the step before it with
the KV cache one position longer. So a generation row of N new tokens is simulated with a few (``SHORT``) new
tokens, twice, and the journal of the N-token run is written from them (tracker.py's entries):

1. the early run, the row's own prompt: its decode steps from the second on (the first still names the
   prompt's storages) must be alike, entry for entry, with each storage's bytes growing by the same step from
   one decode step to the next, and each entry naming its storage the same way (a fixed place back from its
   own, or one fixed storage made before them);
2. the decode steps up to N are written by those rules, and what follows the last one (the step's end, the
   next step's prompt) names the last steps' storages where the early run named its own last steps';
3. the late run checks the far end: its prompt is N - SHORT tokens longer, so its decode steps see the
   positions the N-token run's last steps see. Its last steps and what follows them must be the written
   journal's, entry for entry and byte for byte, and must name their storages the same way. A size that stops
   growing (a sliding window), or jumps (a padding), on the way there fails this check.

Only then is the written journal used. Where any check fails there is no fast answer, and the caller runs
the row's N tokens. The answers are the full run's, byte for byte, on every architecture tests/test_decode.py
runs (each step's decode steps are found by a mark at each forward pass of the model, which the caller
records: ``marks``)."""

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any

from generator.predict.fast.depth import _tokens

SHORT = 5  # the new tokens of the two short runs: four decode steps a step, three of them alike
Entry = tuple[Any, ...]  # a tracker's journal entry; here with each storage named by its made entry's index


def indexed(journal: Sequence[Entry]) -> list[Entry]:
    """The journal with each storage named by the index of the entry that made it (keys are reused): the names
    depth.py's tokens read."""
    names = _tokens(journal)[1]
    return [entry if name is None else (entry[0], name, *entry[2:]) for entry, name in zip(journal, names, strict=True)]


@dataclass(frozen=True)
class Pass:
    """One step's generation in a journal: where its decode steps start, how long each is, and where it ends."""

    starts: tuple[int, ...]  # the index of each decode step's first entry (the prompt's pass comes before)
    length: int  # the entries of each alike decode step (the second on)
    end: int  # where the next step's prompt, or the journal, begins

    @property
    def steady(self) -> range:
        """The alike decode steps, by number (0 is the first decode step)."""
        return range(1, len(self.starts))

    @property
    def after(self) -> int:
        """Where what follows the last decode step begins."""
        return self.starts[-1] + self.length


def passes(marks: Sequence[int], end: int, steps: int) -> list[Pass] | None:
    """Each step's decode steps, from the marks (the journal's length at each forward pass: the prompt's, then
    SHORT - 1 decode steps, a step); None where they are not so many, or the decode steps are not alike in
    length."""
    if len(marks) != steps * SHORT:  # each step: the prompt's forward pass, then SHORT - 1 decode steps
        return None
    found = []
    for number in range(steps):
        own = marks[number * SHORT:(number + 1) * SHORT]
        last = marks[(number + 1) * SHORT] if number + 1 < steps else end
        starts = tuple(own[1:])
        lengths = {b - a for a, b in pairwise(starts[1:])}  # the first decode step's own may differ
        length = starts[2] - starts[1]
        if lengths != {length} or last - starts[-1] < length:
            return None
        found.append(Pass(starts, length, last))
    return found


def _rule(entries: list[Entry], where: Pass, offset: int) -> tuple[Any, ...] | None:
    """How the entry at ``offset`` of each alike decode step goes on: ("made", bytes at the first, growth, what
    it is), ("names", kind of entry, "back" steps or "fixed" index, the rest), or the entry itself; None where
    the alike steps disagree."""
    seen = [entries[where.starts[step] + offset] for step in where.steady]
    kind = seen[0][0]
    if any(entry[0] != kind for entry in seen):
        return None
    if kind == "made":
        sizes = [entry[2] for entry in seen]
        growth = sizes[1] - sizes[0]
        alike = all(entry[3] == seen[0][3] for entry in seen)
        steady = all(size == sizes[0] + n * growth for n, size in enumerate(sizes))
        return ("made", sizes[0], growth, seen[0][3]) if alike and steady else None
    if kind == "phase":
        return seen[0] if all(entry == seen[0] for entry in seen) else None
    if any(entry[2:] != seen[0][2:] for entry in seen):
        return None
    back = {where.starts[step] + offset - entry[1] for step, entry in zip(where.steady, seen, strict=True)}
    if len(back) == 1:
        return ("names", kind, "back", back.pop(), seen[0][2:])
    if len({entry[1] for entry in seen}) == 1 and seen[0][1] < where.starts[1]:
        return ("names", kind, "fixed", seen[0][1], seen[0][2:])
    return None


def rules(entries: list[Entry], where: Pass) -> list[tuple[Any, ...]] | None:
    """Each offset's rule (_rule), for one step's alike decode steps; None where any offset has none."""
    found = [_rule(entries, where, offset) for offset in range(where.length)]
    return None if any(rule is None for rule in found) else found  # type: ignore[return-value]


def _step(rules_: list[tuple[Any, ...]], number: int, start: int, moved: dict[int, int]) -> list[Entry]:
    """Decode step ``number`` (0 the first), written from the rules, beginning at index ``start``."""
    written: list[Entry] = []
    for offset, rule in enumerate(rules_):
        if rule[0] == "made":
            written.append(("made", None, rule[1] + (number - 1) * rule[2], rule[3]))
        elif rule[0] == "names":
            named = start + offset - rule[3] if rule[2] == "back" else moved[rule[3]]  # fixed: copied before
            written.append((rule[1], named, *rule[4]))
        else:
            written.append(rule)
    return written


def _copy(early: list[Entry], indices: range, written: list[Entry], moved: dict[int, int]) -> None:
    """Copy early entries to the written journal, each naming its storage where that now is, and say where each
    went (``moved``)."""
    for index in indices:
        entry = early[index]
        moved[index] = len(written)
        written.append(entry if entry[0] in ("made", "phase") else (entry[0], moved[entry[1]], *entry[2:]))


def _written(early: list[Entry], where: list[Pass], found: list[list[tuple[Any, ...]]],
             new_tokens: int) -> tuple[list[Entry], list[Pass]]:
    """The N-token run's entries (named by index): the early run's, with each step's decode steps written up
    to N by its rules, and what follows them naming the last written steps where the early run named its own
    last steps; and each step's decode steps in it."""
    written: list[Entry] = []
    moved: dict[int, int] = {}  # an early entry's index -> its index in the written journal
    starts: list[list[int]] = []  # each step's decode steps' first entries in the written journal
    done = 0
    for each, rules_ in zip(where, found, strict=True):
        _copy(early, range(done, each.after), written, moved)
        first = len(written)  # the first written decode step begins here
        for number in range(SHORT - 1, new_tokens - 1):
            written += _step(rules_, number, len(written), moved)
        starts.append([moved[start] for start in each.starts] + list(range(first, len(written), each.length)))
        shift = new_tokens - SHORT
        for step in each.steady:  # what follows names the last steps: the early run's step j is step j + shift
            begins = first + (step + shift - (SHORT - 1)) * each.length
            moved.update({each.starts[step] + offset: begins + offset for offset in range(each.length)})
        done = each.after
    _copy(early, range(done, len(early)), written, moved)
    ends = [moved[each.end] if each.end < len(early) else len(written) for each in where]
    return written, [Pass(tuple(own), each.length, end) for own, each, end in zip(starts, where, ends, strict=True)]


def keyed(entries: list[Entry]) -> list[Entry] | None:
    """A journal again, each storage keyed by its made entry's index; None where an entry names a storage that
    is not live."""
    live: set[int] = set()
    journal: list[Entry] = []
    for index, entry in enumerate(entries):
        if entry[0] == "made":
            live.add(index)
            journal.append(("made", index, *entry[2:]))
            continue
        if entry[0] != "phase":
            if entry[1] not in live:
                return None
            if entry[0] == "freed":
                live.remove(entry[1])
        journal.append(entry)
    return journal


def _pattern(rule: tuple[Any, ...]) -> tuple[Any, ...]:
    """A rule without what a longer prompt changes: the bytes of a storage at the first step, the index of a
    fixed storage."""
    if rule[0] == "made":
        return ("made", rule[2], rule[3])
    if rule[0] == "names" and rule[2] == "fixed":
        return rule[:3] + rule[4:]
    return rule


def _place(where: Pass, index: int) -> tuple[Any, ...]:
    """Where a named storage was made, seen from one step's end: in an alike decode step (which, and where in
    it), after them, or before."""
    if index >= where.after:
        return ("after", index - where.after)
    if index >= where.starts[1]:
        step = (index - where.starts[1]) // where.length + 1
        return ("step", step, index - where.starts[step])
    return ("before",)


def _far_end_agrees(journal: list[Entry], written: list[Pass], late_journal: Sequence[Entry], far: list[Pass],
                    shift: int) -> bool:
    """Whether the late run's alike decode steps, and what follows them, are the written journal's last ones,
    entry for entry and byte for byte (depth.py's tokens: each entry with the bytes of the storage it names),
    and name their storages in the same places."""
    (tokens, names), (late, late_names) = _tokens(journal), _tokens(late_journal)
    for long, short in zip(written, far, strict=True):
        for step in short.steady:
            begins, late_begins = long.starts[step + shift], short.starts[step]
            if tokens[begins:begins + long.length] != late[late_begins:late_begins + short.length]:
                return False
        if tokens[long.after:long.end] != late[short.after:short.end]:
            return False
        for offset in range(long.end - long.after):
            named, late_named = names[long.after + offset], late_names[short.after + offset]
            if named is None or late_named is None:
                if named != late_named:
                    return False
            elif _moved_back(_place(long, named), shift) != _place(short, late_named):
                return False
    return True


def _moved_back(place: tuple[Any, ...], shift: int) -> tuple[Any, ...]:
    """A place in the written journal as the late run has it: its decode step ``shift`` earlier."""
    return ("step", place[1] - shift, place[2]) if place[0] == "step" else place


def extend(early_journal: Sequence[Entry], early_marks: Sequence[int], late_journal: Sequence[Entry],
           late_marks: Sequence[int], steps: int, new_tokens: int) -> list[Entry] | None:
    """The journal of the row's run with ``new_tokens`` new tokens, from the early run (the row's prompt, SHORT
    new tokens) and the late run (a prompt new_tokens - SHORT longer, SHORT new tokens), each with its marks;
    None where they do not follow the rules (see the module's text)."""
    early, late = indexed(early_journal), indexed(late_journal)
    where, far = passes(early_marks, len(early), steps), passes(late_marks, len(late), steps)
    if where is None or far is None or new_tokens < 2 * SHORT:
        return None
    found = [each for each in (rules(early, one) for one in where) if each is not None]
    seen = [each for each in (rules(late, one) for one in far) if each is not None]
    if len(found) != len(where) or len(seen) != len(far):
        return None
    if [[_pattern(rule) for rule in each] for each in found] != [[_pattern(rule) for rule in each] for each in seen]:
        return None
    entries, written = _written(early, where, found, new_tokens)
    journal = keyed(entries)
    if journal is None or not _far_end_agrees(journal, written, late_journal, far, new_tokens - SHORT):
        return None
    return journal
