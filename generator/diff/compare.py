"""`diff`: compare one model's rows between two environments, row by row, against the noise of each row.

A Comparison is an object; the terminal, Markdown and JSON renderers live in generator/diff/render.py. A row's verdict
is `same`, `more`, `less`, `only before`, `only after`, `failed` (it finished before and not after) or
`not comparable` (generator/store/comparability.py's reason). The threshold of a row is the largest of the noise floor
(NOISE_FLOOR of the row, at least NOISE_FLOOR_BYTES) and the relative spread (max − min over the median) of its
independent repeats on either side; --threshold overrides it. Net peaks are compared: the whole-process peak
minus the imports of the same process."""

from collections.abc import Iterable
from dataclasses import dataclass, replace
from enum import StrEnum

from generator.matrix import Mode, RowSpec
from generator.store.catalog import Selection
from generator.store.comparability import LIBRARY_KEYS, comparable, environment_differences
from generator.store.history import CATEGORY_FIELDS
from generator.store.layout import environment_folder
from generator.store.records import ResultsError, RowResult
from generator.units import signed_mib

# The smallest change called real: NOISE_FLOOR of the row's net peak, and never under NOISE_FLOOR_BYTES. Two
# separate runs of the default matrix on one machine (method 2, three independent repeats each, SmolLM2 under
# transformers 5.24.0) moved a row's median by at most 1.3 %, while single repeats of one row spread by up to
# 5.1 % (train-b8-s256-ckpt: 4,156 to 4,371 MiB); so a row whose own repeats happened to agree is still judged
# against a floor above both. On small rows the file-backed pages a process first touches move the peak by a
# few MiB whatever its size (tiny-config runs: 6 MiB on 40 MiB), hence the floor in bytes.
NOISE_FLOOR = 0.05
NOISE_FLOOR_BYTES = 32 * 2**20
# Under glibc-tuned every tensor over 128 KiB is its own mapping, returned when freed, so what varies between
# repeats is little more than the runtime's small allocations. The floor for rows measured under it comes
# from the noise study in the docs (templates/docs-releases.md) (two separate runs of the whole matrix, diffed).
TUNED_NOISE_FLOOR = 0.005
TUNED_NOISE_FLOOR_BYTES = 4 * 2**20
FLOORS = {"glibc-tuned": (TUNED_NOISE_FLOOR, TUNED_NOISE_FLOOR_BYTES)}


class Verdict(StrEnum):
    """A row's verdict: the name logic compares, which the renderers also print as it is."""

    SAME = "same"
    MORE = "more"
    LESS = "less"
    ONLY_BEFORE = "only before"
    ONLY_AFTER = "only after"
    FAILED = "failed"
    NOT_COMPARABLE = "not comparable"


WORSE = (Verdict.MORE, Verdict.FAILED)
JUDGED = (Verdict.SAME, Verdict.MORE, Verdict.LESS)  # both sides finished and judged against a threshold


@dataclass(frozen=True)
class Side:
    """One environment's figures for a row."""

    net_bytes: int
    min_bytes: int
    max_bytes: int
    repeats: int
    peak_phase: str  # the phase whose peak is the row's peak
    phase_net_bytes: dict[str, int]  # each phase's peak, net of imports
    status: str

    @property
    def spread(self) -> float:
        """(max − min) / median of the independent repeats; 0 with one repeat."""
        return (self.max_bytes - self.min_bytes) / self.net_bytes if self.repeats > 1 and self.net_bytes else 0.0


@dataclass(frozen=True)
class RowDiff:
    """One row's verdict."""

    row: str
    verdict: str
    reason: str
    before: Side | None
    after: Side | None
    change_bytes: int
    change: float  # after / before − 1
    threshold: float
    threshold_source: str
    moved_most: str  # the phase whose net peak changed most, with the change; '' when not compared
    tensor: "TensorChange | None" = None  # the simulated tensor peaks, where both sides recorded one
    judged_on: str = ""  # the row whose verdict counts instead: its glibc-tuned twin, measured on both sides

    @property
    def compared(self) -> bool:
        """Both sides finished and were judged against a threshold (not only on one side, failed or
        incomparable)."""
        return self.verdict in JUDGED


@dataclass(frozen=True)
class TensorChange:
    """The change of a row's simulated tensor peak: exact, so any byte counts. The category that moved most
    says what changed (weights, gradients, AdamW state, or activations and temporaries), and `disagrees`
    flags a row whose tensors and measurement tell different stories: a library change the process hid, or an
    allocator or process effect the tensors do not show."""

    before_bytes: int
    after_bytes: int
    change_bytes: int
    change: float
    verdict: str  # same (not one byte), more or less
    moved_most: str  # 'activations (+12 MiB)'; '' when nothing moved
    disagrees: str = ""


@dataclass(frozen=True)
class Comparison:
    """Two environments' rows of one model, compared."""

    model: str
    before: str  # environment ids
    after: str
    library_changes: tuple[tuple[str, str, str], ...]  # (library, before, after) for those that differ
    differences: tuple[tuple[str, str, str], ...]  # every other environment key that differs
    rows: tuple[RowDiff, ...]

    @property
    def worse(self) -> tuple[RowDiff, ...]:
        """Rows that got worse beyond their threshold, or stopped finishing; a row judged on its glibc-tuned
        twin counts through the twin."""
        return tuple(row for row in self.rows if row.verdict in WORSE and not row.judged_on)


def side(result: RowResult) -> Side:
    """A row's figures, net of the imports baseline."""
    summary = result.summary
    phases = {name: max(peak - summary.baseline_bytes, 0) for name, peak in summary.phase_peak_bytes.items()}
    nets = [repeat.net_peak_bytes for repeat in result.repeats if repeat.status == "ok"] or [summary.net_peak_bytes]
    return Side(net_bytes=summary.net_peak_bytes, min_bytes=summary.net_peak_min_bytes or min(nets),
                max_bytes=summary.net_peak_max_bytes or max(nets), repeats=len(nets),
                peak_phase=max(phases, key=lambda name: phases[name]) if phases else "",
                phase_net_bytes=phases, status=summary.status)


def threshold_for(before: Side, after: Side, override: float | None,
                  allocator: str = "glibc") -> tuple[float, str]:
    """The relative change beyond which a row counts as changed, and where it comes from: the rows' own spread,
    at least the noise floor of the allocator they ran under."""
    if override is not None:
        return override, "--threshold"
    share, n_bytes = FLOORS.get(allocator, (NOISE_FLOOR, NOISE_FLOOR_BYTES))
    floor = max(share, n_bytes / before.net_bytes if before.net_bytes else share)
    spreads = {"before's repeats": before.spread, "after's repeats": after.spread, "noise floor": floor}
    source = max(spreads, key=lambda name: spreads[name])
    return spreads[source], source


def moved_most(before: Side, after: Side) -> str:
    """The phase whose net peak changed most, either way: 'step2 (−299 MiB)'."""
    shared = [name for name in after.phase_net_bytes if name in before.phase_net_bytes]
    if not shared:
        return ""
    change = {name: after.phase_net_bytes[name] - before.phase_net_bytes[name] for name in shared}
    name = max(shared, key=lambda phase: abs(change[phase]))
    return f"{name} ({signed_mib(change[name])})"


def diff_row(row_id: str, before: RowResult | None, after: RowResult | None, override: float | None) -> RowDiff:
    """One row's verdict."""
    sides = (side(before) if before else None, side(after) if after else None)
    empty = {"change_bytes": 0, "change": 0.0, "threshold": 0.0, "threshold_source": "", "moved_most": ""}
    if before is None or after is None:
        verdict = "only after" if before is None else "only before"
        return RowDiff(row_id, verdict, "", *sides, **empty)  # type: ignore[arg-type]
    reason = comparable(before, after)
    if reason:
        return RowDiff(row_id, "not comparable", reason, *sides, **empty)  # type: ignore[arg-type]
    old, new = sides[0], sides[1]
    assert old is not None and new is not None
    if old.status != "ok" or new.status != "ok":
        verdict = "failed" if old.status == "ok" else "not comparable"
        reason = f"after: {new.status}" if old.status == "ok" else f"before: {old.status}"
        return RowDiff(row_id, verdict, reason, old, new, **empty)  # type: ignore[arg-type]
    change = new.net_bytes / old.net_bytes - 1 if old.net_bytes else 0.0
    threshold, source = threshold_for(old, new, override, after.row.allocator)
    verdict = "more" if change > threshold else "less" if change < -threshold else "same"
    return RowDiff(row_id, verdict, "", old, new, new.net_bytes - old.net_bytes, change, threshold, source,
                   moved_most(old, new), tensor_change(before, after, verdict, threshold))


def tensor_change(before: RowResult, after: RowResult, measured: str, threshold: float) -> TensorChange | None:
    """The exact change of the simulated tensor peak, where both rows carry a prediction of the same simulator
    (two simulators' tensor peaks differ by the simulator, not the library: not compared)."""
    old, new = before.prediction, after.prediction
    if old is None or new is None or old.method != new.method:
        return None
    change_bytes = new.tensor_peak_bytes - old.tensor_peak_bytes
    verdict = "more" if change_bytes > 0 else "less" if change_bytes < 0 else "same"
    moves = {name: getattr(new, key) - getattr(old, key) for name, key in CATEGORY_FIELDS.items()}
    name = max(moves, key=lambda category: abs(moves[category]))
    moved = f"{name} ({signed_size(moves[name])})" if moves[name] else ""
    change = change_bytes / old.tensor_peak_bytes if old.tensor_peak_bytes else 0.0
    return TensorChange(old.tensor_peak_bytes, new.tensor_peak_bytes, change_bytes, change, verdict, moved,
                        disagreement(verdict, change, measured, threshold))


def disagreement(tensors: str, change: float, measured: str, threshold: float) -> str:
    """Where the exact tensors and the measurement tell different stories, which one moved."""
    if tensors != "same" and measured == "same":
        if abs(change) < threshold:
            return "the tensors moved by less than the measurement can see"
        return "the tensors moved beyond the measured threshold, the measurement did not"
    if measured in ("more", "less") and (tensors == "same" or abs(change) < threshold / 2):
        return "the measurement moved, the tensors did not: the allocator or the process, not the tensors"
    return ""


def signed_size(n_bytes: int) -> str:
    """'+12 MiB', or '+2,048 bytes' below a MiB, where MiB would read as no change."""
    return signed_mib(n_bytes) if abs(n_bytes) >= 2**20 else f"{n_bytes:+,} bytes".replace("-", "−")


class DifferentModelsError(ResultsError):
    """Two sides that hold different models: nothing on them compares."""


class NothingComparedError(ResultsError):
    """Two sides with no row that could be compared: a gate that passed would have checked nothing."""


# Verdicts that come from comparing a row's two sides (the others say why it was not compared).
COMPARED = (*JUDGED, Verdict.FAILED)


def compare(before: Selection, after: Selection, override: float | None = None) -> Comparison:
    """Every row of either side, in the order of the after side's rows, then rows only before. Sides that
    hold different models are refused: every row would be 'not comparable', and a gate would pass."""
    if before.model != after.model:
        raise DifferentModelsError(f"diff: the before side holds {before.model!r} and the after side "
                                   f"{after.model!r}; pass --model with a model that both sides hold")
    old = {r.row.id: r for r in before.results if r.row.mode != Mode.BASELINE}
    new = {r.row.id: r for r in after.results if r.row.mode != Mode.BASELINE}
    order = [*_ordered(new.values()), *[row_id for row_id in _ordered(old.values()) if row_id not in new]]
    env_before, env_after = before.results[0].environment, after.results[0].environment
    libraries = tuple((key, getattr(env_before, key), getattr(env_after, key)) for key in LIBRARY_KEYS
                      if getattr(env_before, key) != getattr(env_after, key))
    rows = tuple(diff_row(row_id, old.get(row_id), new.get(row_id), override) for row_id in order)
    if not any(row.verdict in COMPARED for row in rows):
        why = next((f" (first: {row.row}, {row.reason})" for row in rows if row.reason), "")
        raise NothingComparedError(f"diff: no row of {after.model} could be compared between {before.folder} "
                                   f"({len(old)} rows) and {after.folder} ({len(new)} rows): none is on both sides, "
                                   f"finished and comparable, so nothing was checked{why}")
    # one environment id on both sides (two copies of one set-up): the folders tell the sides apart
    names = ((before.environment, after.environment) if before.environment != after.environment
             else (str(environment_folder(before.folder)), str(environment_folder(after.folder))))
    return Comparison(model=after.model, before=names[0], after=names[1], library_changes=libraries,
                      differences=tuple(environment_differences(env_before, env_after)),
                      rows=defer_to_tuned(rows, {r.row.id: r.row for r in new.values()}))


def defer_to_tuned(rows: tuple[RowDiff, ...], specs: dict[str, RowSpec]) -> tuple[RowDiff, ...]:
    """A default-glibc row whose glibc-tuned twin was compared on both sides is judged on the twin: its repeats
    spread far less, so it sees a smaller change."""
    compared = {row.row for row in rows if row.threshold_source}
    judged = []
    for row in rows:
        spec = specs.get(row.row)
        twin = spec.with_allocator("glibc-tuned").id if spec is not None and spec.allocator == "glibc" else ""
        judged.append(replace(row, judged_on=twin) if twin in compared and row.threshold_source else row)
    return tuple(judged)


def _ordered(results: Iterable[RowResult]) -> list[str]:
    rows = sorted(results, key=lambda r: (r.row.memory_limit_bytes > 0, r.row.mode, r.row.tokens_per_step, r.row.id))
    return [r.row.id for r in rows]


def parse_threshold(text: str) -> float:
    """'2%' -> 0.02; raise ValueError otherwise."""
    number = text.strip().removesuffix("%").strip()
    try:
        value = float(number)
    except ValueError:
        raise ValueError(f"not a percentage: {text!r} (try 2%)") from None
    if not text.strip().endswith("%") or value != value:
        raise ValueError(f"not a percentage: {text!r} (try 2%)")
    if value < 0:
        raise ValueError(f"must be 0% or more: {text!r}")
    if value >= 1000:
        raise ValueError(f"must be under 1000%: {text!r}")
    return value / 100
