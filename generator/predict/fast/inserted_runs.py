"""Where one more layer's entries sit in a journal (depth.py's step 1): the runs of entries that depth a+1 inserts
into depth a, found greedily where the two journals part (the shortest run after which they agree again for 64
entries, else 32, 16 or 8), else as difflib's SequenceMatcher aligns them; and, where depth a+2 shows a run to be
several nesting (an optimizer's foreach update makes every parameter's temporaries, then frees them in reverse),
that run split as depth a+2 needs it."""

from difflib import SequenceMatcher
from typing import Any

Token = tuple[Any, ...]  # a journal entry without its storage key (depth.py's _tokens)
Run = tuple[int, int, int]  # where in depth a, start and end in depth a+1
WINDOWS = (64, 32, 16, 8)  # entries that must agree again after an inserted run: as many as the next run allows
ALIGNERS = ("windows", "matcher")  # how the runs are found (find_runs), in order: the first that reads a shape wins


def find_runs(base: list[Token], longer: list[Token], aligner: str = "windows") -> list[Run] | None:
    """The runs of ``longer`` inserted into ``base``: (where in base, start and end in longer), by the greedy
    windows or by difflib's matcher; None where ``longer`` is not ``base`` with runs inserted."""
    if aligner == "matcher":
        return _matched(base, longer)
    runs, i, j = [], 0, 0
    while i < len(base):
        if j < len(longer) and base[i] == longer[j]:
            i, j = i + 1, j + 1
            continue
        length = next((found for window in WINDOWS if (found := _resumes(base, i, longer, j, window))), None)
        if length is None:
            return None
        runs.append((i, j, j + length))
        j += length
    if j < len(longer):
        runs.append((len(base), j, len(longer)))
    return runs


def _resumes(base: list[Token], i: int, longer: list[Token], j: int, window: int) -> int | None:
    """The shortest run of ``longer`` from j after which it agrees with ``base`` from i for ``window`` entries
    (or to base's end)."""
    window = min(window, len(base) - i)
    after, first = base[i:i + window], base[i] if window else None
    return next((n for n in range(1, len(longer) - j - window + 1)  # the first entry checked before the window
                 if (not window or longer[j + n] == first) and longer[j + n:j + n + window] == after), None)


def _matched(base: list[Token], longer: list[Token]) -> list[Run] | None:
    """The runs as difflib's SequenceMatcher aligns the two journals, where all it finds are insertions."""
    runs = []
    for operation, where, _, start, end in SequenceMatcher(None, base, longer, autojunk=False).get_opcodes():
        if operation == "insert":
            runs.append((where, start, end))
        elif operation != "equal":
            return None
    return runs


def doubled(base: list[Token], longer: list[Token], runs: list[Run], two: list[Token]) -> list[Run] | None:
    """The runs, each split into the pieces depth a+2 repeats in turn (a run it repeats whole stays whole), so
    that depth a with each run twice is depth a+2; None where no split gives it."""
    split: list[Run] = []
    done = at = 0  # depth a's entries placed, depth a+2's entries matched
    for where, start, end in runs:
        if base[done:where] != two[at:at + where - done]:
            return None
        at, done = at + where - done, where
        pieces = _pieces(longer[start:end], two, at)
        if pieces is None:
            return None
        split += [(where, start + first, start + last) for first, last in pieces]
        at += 2 * (end - start)
    return split if base[done:] == two[at:] else None


def _pieces(run: list[Token], two: list[Token], at: int) -> list[tuple[int, int]] | None:
    """The pieces of a run (start and end in it) that depth a+2 repeats in turn from ``at``: the longest first
    piece that works, so a run repeated whole is one piece."""
    failed: set[int] = set()  # a piece from k onwards is at ``at + 2 * k`` in depth a+2, whatever came before

    def rest(k: int) -> list[tuple[int, int]] | None:
        if k == len(run):
            return []
        if k in failed:
            return None
        for cut in range(len(run), k, -1):
            place, size = at + 2 * k, cut - k
            if two[place:place + size] == run[k:cut] == two[place + size:place + 2 * size]:
                found = rest(cut)
                if found is not None:
                    return [(k, cut), *found]
        failed.add(k)
        return None

    return rest(0)


def split_runs(base: list[Token], longer: list[Token], two: list[Token], found: list[Run] | None) -> list[Run]:
    """The runs depth a+1 inserts (``found``, as an aligner finds them), split as depth a+2 repeats them; []
    where there are none or depth a+2 is not depth a with each twice."""
    return (doubled(base, longer, found, two) or []) if found else []
