"""The versions page's context: each other environment of the article's model, diffed against the article's
(the newest library versions), with a few findings computed from the comparisons.

Like the article's context it is frozen and typed; the template places its values and nothing else."""

from collections.abc import Sequence
from dataclasses import dataclass, replace

from generator.diff.compare import Comparison, NothingComparedError, RowDiff, Verdict, compare
from generator.diff.render import HEADERS, cells
from generator.matrix import parse_row
from generator.report.history import HistoryContext
from generator.report.views import MODE_LABELS
from generator.store.catalog import Selection, library_versions
from generator.store.comparability import same_machine
from generator.units import signed_mib, signed_percent


@dataclass(frozen=True)
class Release:
    """One environment against the newest."""

    label: str  # "transformers 4.57.6 → 5.24.0"
    before: str  # environment ids
    after: str
    differences: tuple[tuple[str, str, str], ...]
    rows: tuple[tuple[str, ...], ...]  # the table's cells, as diff renders them
    counts: str  # "9 same, 1 more"
    largest: RowDiff | None  # the compared row whose net peak moved most, either way
    largest_text: str
    shifts: tuple[str, ...] = ()  # consistent shifts of a mode's rows, in words
    causes: tuple[str, ...] = ()  # what else may have moved them: the tensors' history, the machines


@dataclass(frozen=True)
class VersionsContext:
    """Everything versions.md.j2 places."""

    title: str
    model_name: str
    newest: str
    columns: tuple[str, ...]
    releases: tuple[Release, ...]
    changes: tuple[tuple[str, str, float, float], ...]  # (release label, row, change, threshold) for the chart
    across_machines: bool = False  # no other release was measured on the article's machine
    history: HistoryContext | None = None  # simulated tensor peaks across many releases
    published_page: bool = False  # the site has the page of published GPU figures (published.md)
    exact_rows: int = 0  # rows whose two sides carry simulations of one simulator: the tensors (exact) column
    left_out: tuple[str, ...] = ()  # other environments of the model none of whose rows can be compared
    verdict: Release | None = None  # the newest other release against the article's: the page's first answer
    folded: bool = True  # each comparison's section folded under its heading in the HTML (render.py folded)


# The page's tables leave out the threshold's source and the phases, which `memory-budget diff` prints, so that
# they fit a desktop column with the exact tensor change beside the measured one.
PAGE_NAMES = tuple(name for name in HEADERS if name not in ("peak_phase", "moved_most"))  # the rest: the diff's
PAGE_COLUMNS = tuple(HEADERS[name] for name in PAGE_NAMES)


def page_cells(row: RowDiff) -> tuple[str, ...]:
    """One row's cells, as diff renders them, in the page's columns."""
    return tuple(cell for name, cell in zip(HEADERS, cells(row), strict=True) if name in PAGE_NAMES)


def _library_changes(comparison: Comparison) -> str:
    """'transformers 4.57.6 → 5.24.0', or '' where the library versions are the same."""
    return ", ".join(f"{key} {old} → {new}" for key, old, new in comparison.library_changes)


def release_label(comparison: Comparison) -> str:
    """What changed between the two set-ups, in words."""
    return _library_changes(comparison) or f"{comparison.before} → {comparison.after} (same library versions)"


def chart_label(comparison: Comparison) -> str:
    """The release's name in the chart's legend, short enough to be read whole: the library change, or for the
    same versions on another set-up the last part of that environment's id (its machine's hash)."""
    return _library_changes(comparison) or f"same versions, {comparison.before.rsplit('-', 1)[-1]}"


def largest_change(comparison: Comparison) -> RowDiff | None:
    """The compared row whose net peak moved most, either way."""
    compared = [row for row in comparison.rows if row.compared]
    return max(compared, key=lambda row: abs(row.change)) if compared else None


def describe(row: RowDiff | None) -> str:
    """'train-b8-s256: +3.1 % (+210 MiB), most in step2; within its 5.0 % threshold'."""
    if row is None:
        return "no row could be compared"
    beyond = "beyond" if row.verdict in (Verdict.MORE, Verdict.LESS) else "within"
    sign = f"{signed_percent(row.change)} ({signed_mib(row.change_bytes)})"
    return (f"{row.row}: {sign}, most in {row.moved_most or 'no phase'}; {beyond} its "
            f"{row.threshold * 100:.1f} % threshold ({row.threshold_source}){_tensors_or_allocator(row)}")


def _tensors_or_allocator(row: RowDiff) -> str:
    """Whether the row's simulated tensors moved with it (the library's doing) or not a byte (the allocator's or
    the process's); '' where the two sides carry no comparable simulation."""
    tensor = row.tensor
    if tensor is None:
        return ""
    if tensor.verdict == Verdict.SAME:
        return "; its simulated tensors did not move a byte: the allocator or the process, not the tensors"
    return (f"; its simulated tensors moved {signed_percent(tensor.change)} ({signed_mib(tensor.change_bytes)}), "
            f"most in {tensor.moved_most}: the tensors, the library's doing")


@dataclass(frozen=True)
class Shift:
    """Most compared rows of a mode moved one way, each beyond the range of its own repeats."""

    label: str  # "training"
    word: str  # "rose" or "fell"
    rows: tuple[RowDiff, ...]  # those that moved clearly
    compared: int  # the mode's compared rows


def _shifts(comparison: Comparison) -> tuple[Shift, ...]:
    found = []
    for mode, label in MODE_LABELS.items():
        rows = [row for row in comparison.rows if row.compared and parse_row(row.row).mode == mode]
        for direction, word in ((1, "rose"), (-1, "fell")):
            clear = [row for row in rows if row.before and row.after and direction * row.change > 0
                     and (row.after.min_bytes > row.before.max_bytes if direction > 0
                          else row.after.max_bytes < row.before.min_bytes)]
            if len(rows) >= 3 and len(clear) * 2 > len(rows):
                found.append(Shift(label=label, word=word, rows=tuple(clear), compared=len(rows)))
    return tuple(found)


def _span(changes: list[float]) -> str:
    ordered = sorted(changes)
    return f"{signed_percent(ordered[0])} to {signed_percent(ordered[-1])}"


def shifts(comparison: Comparison) -> tuple[str, ...]:
    """A consistent shift, where no single verdict may show it: most compared rows of a mode moved the same way,
    each beyond the range of its own repeats (the two sides' ranges do not overlap)."""
    return tuple(f"{len(shift.rows)} of {shift.compared} {shift.label} rows {shift.word}, each beyond the range "
                 f"of its own repeats ({_span([row.change for row in shift.rows])}), though "
                 f"{sum(row.verdict == Verdict.SAME for row in shift.rows)} of them read \"same\""
                 for shift in _shifts(comparison))


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def _recorded_span(history: HistoryContext, row: str, old: str, new: str) -> list[tuple[str, int]]:
    """The row's simulated tensor peaks under the recorded releases from the last at or before `old` to `new`;
    [] where the history does not reach either end."""
    series = sorted(((release, peak) for (name, release), peak in history.peaks.items() if name == row),
                    key=lambda item: _version(item[0]))
    start = [index for index, (release, _) in enumerate(series) if _version(release) <= _version(old)]
    end = [index for index, (release, _) in enumerate(series) if release == new]
    return series[start[-1]:end[0] + 1] if start and end else []


def _tensor_story(history: HistoryContext | None, names: list[str], old: str, new: str) -> tuple[str, bool]:
    """What the release history says of these rows' tensors between two releases, and whether they moved."""
    spans = [_recorded_span(history, name, old, new) for name in names] if history else []
    if not spans or not all(spans):
        return "", True
    first = spans[0][0][0]
    moved = [span[-1][1] / span[0][1] - 1 for span in spans if len({peak for _, peak in span}) > 1]
    since = f"every recorded release from {first} to {new}" + ("" if first == old else
                                                                f" ({old} itself was not simulated)")
    if not moved:
        return f"the simulated tensors of these {len(names)} rows are identical to the byte under {since}", False
    return (f"the simulated tensors of {len(moved)} of these {len(names)} rows moved across {since} "
            f"({_span(moved)} in all)"), True


def _exact_story(rows: Sequence[RowDiff]) -> tuple[str, bool] | None:
    """What the two sides' own simulations say of these rows' tensors, and whether they moved; None where a row
    lacks a simulation of one simulator on either side (then the release history speaks)."""
    changes = [row.tensor for row in rows]
    if not changes or any(change is None for change in changes):
        return None
    moved = [change.change for change in changes if change is not None and change.change_bytes]
    if not moved:
        return (f"both sides' simulated tensors of these {len(rows)} rows, one simulator's, are identical to the "
                "byte", False)
    return (f"both sides' simulated tensors, one simulator's, moved in {len(moved)} of these {len(rows)} rows "
            f"({_span(moved)})", True)


def shift_causes(comparison: Comparison, history: HistoryContext | None,
                 machines: Comparison | None) -> tuple[str, ...]:
    """For a shift between releases measured on different machines, what else could have moved it, from the data:
    whether the release history's simulated tensors of the shifted rows changed between the two releases, and how
    much the same library versions moved between the two machines. It is called the machines' only where the
    tensors did not move and the machines' own comparison moved those rows too."""
    versions = {key: (old, new) for key, old, new in comparison.library_changes}
    if "transformers" not in versions or not comparison.differences:
        return ()
    old, new = versions["transformers"]
    same = {row.row: row.change for row in (machines.rows if machines else ()) if row.compared}
    found = []
    for shift in _shifts(comparison):
        names = [row.row for row in shift.rows]
        tensors, moved = _exact_story(shift.rows) or _tensor_story(history, names, old, new)
        across = [same[name] for name in names if name in same]
        machine = (f"the same library versions on these two machines differ by {_span(across)} on {len(across)} "
                   "of these rows (the table of the same library versions)") if across else ""
        said = [part for part in (tensors, machine) if part]
        if said:
            verdict = "; so read the shift as the machines', not the release's" if not moved and across else ""
            found.append(f"Before reading the {shift.label} shift as the release's: " + "; and ".join(said) + verdict)
    return tuple(found)


def release(comparison: Comparison, history: HistoryContext | None = None,
            machines: Comparison | None = None) -> Release:
    """One comparison, ready to place; `machines` is the comparison of the same library versions on the two
    machines, where the page has one."""
    verdicts = [row.verdict for row in comparison.rows]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
    largest = largest_change(comparison)
    return Release(label=release_label(comparison), before=comparison.before, after=comparison.after,
                   differences=comparison.differences, rows=tuple(page_cells(row) for row in comparison.rows),
                   counts=counts, largest=largest, largest_text=describe(largest), shifts=shifts(comparison),
                   causes=shift_causes(comparison, history, machines))


def _newest_release(releases: tuple[Release, ...], comparisons: list[Comparison],
                    versions: dict[str, tuple]) -> Release | None:
    """The comparison of the newest other library versions with the article's: what moved in the last release."""
    found = [(versions[c.before], r) for r, c in zip(releases, comparisons, strict=True) if c.library_changes]
    return max(found, key=lambda item: item[0])[1] if found else None


def uncapped(selection: Selection) -> Selection:
    """A selection without its capped (probe) rows: a cap is chosen per environment, so they never pair up."""
    return replace(selection, results=tuple(r for r in selection.results if not r.row.memory_limit_bytes))


def build_versions(article: Selection, others: list[Selection],
                   history: HistoryContext | None = None) -> VersionsContext:
    """The page: the article's environment against every other one of its model, on the same machine where
    there are such; else against other machines', saying that their verdicts mix machine and release."""
    same = [other for other in others if same_machine(other.results[0].environment, article.results[0].environment)]
    across = not same and bool(others)
    others = same or others
    comparisons, left_out, versions = [], [], {}
    for other in sorted(others, key=lambda s: s.environment):
        try:
            comparisons.append(compare(uncapped(other), uncapped(article)))
        except NothingComparedError:  # another method version's rows only, or none on both sides
            left_out.append(other.environment)
            continue
        versions[other.environment] = library_versions(other.results[0].environment)
    machines = next((c for c in comparisons if not c.library_changes and c.differences), None)
    releases = tuple(release(comparison, history, machines) for comparison in comparisons)
    changes = tuple((chart_label(comparison), row.row, row.change, row.threshold) for comparison in comparisons
                    for row in comparison.rows if row.compared)
    return VersionsContext(title=f"Memory across library versions: {article.model}", model_name=article.model,
                           newest=article.environment, columns=PAGE_COLUMNS, releases=releases, changes=changes,
                           across_machines=across, history=history,
                           left_out=tuple(left_out), verdict=_newest_release(releases, comparisons, versions),
                           exact_rows=sum(row.tensor is not None for comparison in comparisons
                                          for row in comparison.rows))
