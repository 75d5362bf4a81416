"""The versions page's context: each other environment of the article's model, diffed against the article's
(the newest library versions), with a few findings computed from the comparisons.

Like the article's context it is frozen and typed; the template places its values and nothing else."""

from dataclasses import dataclass, replace

from generator.diff.compare import Comparison, RowDiff, compare
from generator.diff.render import COLUMNS, cells
from generator.report.history import HistoryContext
from generator.store.catalog import Selection
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
    exact_rows: int = 0  # rows whose two sides carry simulations of one simulator: the tensors (exact) column


# The page's tables leave out the threshold's source and the phases, which `memory-budget diff` prints, so that
# they fit a desktop column with the exact tensor change beside the measured one.
PAGE_COLUMNS = tuple(column for column in COLUMNS if column not in ("peak phase", "moved most"))


def page_cells(row: RowDiff) -> tuple[str, ...]:
    """One row's cells, as diff renders them, in the page's columns."""
    return tuple(cell for column, cell in zip(COLUMNS, cells(row), strict=True) if column in PAGE_COLUMNS)


def release_label(comparison: Comparison) -> str:
    """What changed between the two set-ups, in words."""
    changes = [f"{key} {old} → {new}" for key, old, new in comparison.library_changes]
    return ", ".join(changes) or f"{comparison.before} → {comparison.after} (same library versions)"


def largest_change(comparison: Comparison) -> RowDiff | None:
    """The compared row whose net peak moved most, either way."""
    compared = [row for row in comparison.rows if row.threshold_source]
    return max(compared, key=lambda row: abs(row.change)) if compared else None


def describe(row: RowDiff | None) -> str:
    """'train-b8-s256: +3.1 % (+210 MiB), most in step2; within its 5.0 % threshold'."""
    if row is None:
        return "no row could be compared"
    beyond = "beyond" if row.verdict in ("more", "less") else "within"
    sign = f"{signed_percent(row.change)} ({signed_mib(row.change_bytes)})"
    return (f"{row.row}: {sign}, most in {row.moved_most or 'no phase'}; {beyond} its "
            f"{row.threshold * 100:.1f} % threshold ({row.threshold_source})")


def shifts(comparison: Comparison) -> tuple[str, ...]:
    """A consistent shift, where no single verdict may show it: most compared rows of a mode moved the same way,
    each beyond the range of its own repeats (the two sides' ranges do not overlap)."""
    found = []
    for mode, label in (("infer", "inference"), ("train", "training"), ("gen", "generation")):
        rows = [row for row in comparison.rows if row.threshold_source and row.row.startswith(f"{mode}-")]
        for direction, word in ((1, "rose"), (-1, "fell")):
            clear = [row for row in rows if row.before and row.after and direction * row.change > 0
                     and (row.after.min_bytes > row.before.max_bytes if direction > 0
                          else row.after.max_bytes < row.before.min_bytes)]
            if len(rows) >= 3 and len(clear) * 2 > len(rows):
                changes = sorted(row.change for row in clear)
                found.append(f"{len(clear)} of {len(rows)} {label} rows {word}, each beyond the range of its own "
                             f"repeats ({signed_percent(changes[0])} to {signed_percent(changes[-1])}), "
                             f"though {sum(row.verdict == 'same' for row in clear)} of them read \"same\"")
    return tuple(found)


def release(comparison: Comparison) -> Release:
    """One comparison, ready to place."""
    verdicts = [row.verdict for row in comparison.rows]
    counts = ", ".join(f"{verdicts.count(v)} {v}" for v in dict.fromkeys(verdicts))
    largest = largest_change(comparison)
    return Release(label=release_label(comparison), before=comparison.before, after=comparison.after,
                   differences=comparison.differences, rows=tuple(page_cells(row) for row in comparison.rows),
                   counts=counts, largest=largest, largest_text=describe(largest), shifts=shifts(comparison))


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
    comparisons = [compare(uncapped(other), uncapped(article)) for other in sorted(others, key=lambda s: s.environment)]
    releases = tuple(release(comparison) for comparison in comparisons)
    changes = tuple((item.label, row.row, row.change, row.threshold)
                    for item, comparison in zip(releases, comparisons, strict=True)
                    for row in comparison.rows if row.threshold_source)
    return VersionsContext(title=f"Memory across library versions: {article.model}", model_name=article.model,
                           newest=article.environment, columns=PAGE_COLUMNS, releases=releases, changes=changes,
                           across_machines=across, history=history,
                           exact_rows=sum(row.tensor is not None for comparison in comparisons
                                          for row in comparison.rows))
