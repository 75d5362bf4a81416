"""The depth fast path's driver: a row at full depth from its runs at a few small depths (depth.py), or from
another batch's shape of the row and one of them; with generation's decode steps written from two short runs
(decode.py) and the stack checked first (stack.py). simulate.py asks it for each batch of a row, and takes the full
depth where it gives no answer."""

from dataclasses import dataclass, replace
from typing import Any

from generator.matrix import Mode, RowSpec
from generator.model_source import ModelSource, load_config
from generator.predict.exact.cuda_program import Program
from generator.predict.exact.run import ModelFacts, model_facts, run_fake
from generator.predict.exact.tracker import StorageTracker
from generator.predict.fast import decode, depth, stack
from generator.predict.fast.fake_mode import tracking_fake_mode
from generator.quantize import checkpointed_four_bit
from generator.steps import Prepared

DEPTHS = 4  # the small depths the fast path simulates (generator/predict/fast/depth.py), from FIRST_LAYERS; three where
# the row's stack was seen to repeat at another batch (_seen_repeat)
FIRST_LAYERS = (1, 2)
WORTH_LAYERS = 16  # below this, the small depths (10 layers in all, or 14) cost about what the full depth does
Simulated = tuple[StorageTracker, ModelFacts, bool]  # a finished run's tracker, the model's counts, and whether
# the experts went through transformers' fallback op


def fast_run(row: RowSpec, source: ModelSource, program: Program, layers: int | None = None,
             marks: list[int] | None = None) -> tuple[StorageTracker, Prepared, bool]:
    """The exact run of the row's steps (exact/run.py run_fake), under the fast path's FakeTensorMode
    (fake_mode.py), at ``layers`` decoder layers (the full depth if None); its journal is the reference's,
    entry for entry (tests/test_fake_mode.py)."""
    return run_fake(row, source, program, stack.cut_config(source, layers), marks, tracking_fake_mode)


def decoded(row: RowSpec, source: ModelSource, program: Program,
            layers: int | None = None) -> tuple[StorageTracker, Prepared, bool] | None:
    """fast_run of a generation row of many new tokens, written from two runs of a few
    (generator/predict/fast/decode.py); None where it is not such a row, or their decode steps do not follow the
    rules."""
    if row.mode != Mode.GENERATE or row.new_tokens < 2 * decode.SHORT:
        return None
    early_marks: list[int] = []
    late_marks: list[int] = []
    early = fast_run(replace(row, new_tokens=decode.SHORT), source, program, layers, early_marks)
    late_row = replace(row, seq_len=row.seq_len + row.new_tokens - decode.SHORT, new_tokens=decode.SHORT)
    late = fast_run(late_row, source, program, layers, late_marks)
    journal = decode.extend(early[0].journal, early_marks, late[0].journal, late_marks, row.steps,
                            row.new_tokens)
    if journal is None or early[2] != late[2]:
        return None
    return StorageTracker.replay(journal), early[1], early[2]


def run_row(row: RowSpec, source: ModelSource, program: Program,
            layers: int | None = None) -> tuple[StorageTracker, Prepared, bool]:
    """The row's run at ``layers`` (the full depth if None): by the decode fast path where it answers, else
    every step run (fast_run); the figures are the same."""
    return decoded(row, source, program, layers) or fast_run(row, source, program, layers)


def simulate_full(row: RowSpec, source: ModelSource, program: Program, fast: bool = True) -> Simulated:
    """The row's steps at the model's full depth, as the program runs them (with every decode step run,
    unless ``fast``: run_row)."""
    tracker, prepared, rerouted = (run_row if fast else fast_run)(row, source, program)
    return tracker, model_facts(prepared, row), rerouted


@dataclass(frozen=True)
class KnownShape:
    """How a row's stack repeats, read at one batch (depth.shape), with the model's counts the small depths gave."""

    first: int  # the first of the small depths
    period: int  # the layers each next small depth adds: the period in which the stack's layers repeat
    shape: depth.Shape
    facts: ModelFacts  # at depth first + period, which another batch's must equal
    full: ModelFacts  # at the full depth
    rerouted: bool


# The shapes read in this process, by config, LoRA targets, row but its batch, and program: another batch of the
# row needs one small depth instead of four (simulate_like). fit's search asks one row at several batches.
SHAPES: dict[tuple[Any, ...], KnownShape] = {}


def shape_key(row: RowSpec, source: ModelSource, program: Program) -> tuple[Any, ...]:
    return source.config_sha256, source.lora_targets, replace(row, batch_size=0), program


def simulate_by_depth(row: RowSpec, source: ModelSource, program: Program,
                      worth: int = 0) -> Simulated | None:
    """The same as simulate_full, from another batch's shape of the row (simulate_like), else from the row's
    steps at four small depths (three where _seen_repeat: generator/predict/fast/depth.py), from each start _starts
    gives in turn: where a stack that begins with other layers turns uniform, one layer, two layers (a stack of
    none is no start: its rotary tables, kept by no layer, are freed early), then a period of several for a
    stack that repeats in one. None where the stack has fewer than ``worth`` layers, is too shallow for the small
    depths, has a layer past them that they never met (stack.py), or its trace does not repeat; and for a
    checkpointed 4-bit base (quantize.checkpointed_four_bit)."""
    layers = load_config(source).num_hidden_layers
    if layers < worth or checkpointed_four_bit(row):
        return None
    small = SmallDepths(row, source, program)
    found = simulate_like(row, source, program, small)
    if found is not None:
        return found
    for start in _starts(source, layers):
        found = _by_depth(row, source, program, layers, start, small)
        if found is not None:
            return found
    return None


def _starts(source: ModelSource, layers: int) -> list[tuple[int, int]]:
    """Where the small depths may start, and the layers each next one adds: a layer each, from where a stack
    that begins with layers of another kind turns uniform (its small depths from an earlier layer would meet
    both kinds), then from FIRST_LAYERS; then a period each, for a stack whose layers repeat in one
    (stack.periods). Each only where its deepest small depth leaves layers to gain, and every layer past it is
    one the small depths met (stack.repeats_past)."""
    uniform = stack.uniform_from(source)
    starts = [(uniform, 1)] if uniform is not None and uniform > FIRST_LAYERS[-1] else []
    starts += [(first, 1) for first in FIRST_LAYERS] + stack.periods(source)
    return [(first, period) for first, period in starts
            if layers >= first + (DEPTHS - 1) * period + 2 and stack.repeats_past(source, first, DEPTHS, period)]


class SmallDepths:
    """One row's runs at small depths, each run once however many paths ask for it: a batch that the shape
    of another does not serve goes on to read its own with the shape's depth a+1 already run."""

    def __init__(self, row: RowSpec, source: ModelSource, program: Program) -> None:
        self.row, self.source, self.program = row, source, program
        self.done: dict[int, tuple[StorageTracker, Prepared, bool]] = {}

    def __call__(self, layers: int) -> tuple[StorageTracker, Prepared, bool]:
        if layers not in self.done:
            self.done[layers] = run_row(self.row, self.source, self.program, layers)
        return self.done[layers]


def simulate_like(row: RowSpec, source: ModelSource, program: Program,
                  small: SmallDepths | None = None) -> Simulated | None:
    """The same as simulate_full, from one small depth (the shape's first + period) and the shape read at another
    batch of the row in this process (depth.extend_like); None where there is none, or it does not serve this
    batch (which then reads its own, with that depth already run)."""
    known = SHAPES.get(shape_key(row, source, program))
    if known is None:
        return None
    tracker, prepared, rerouted = (small or SmallDepths(row, source, program))(known.first + known.period)
    if model_facts(prepared, row) != known.facts or rerouted != known.rerouted:
        return None
    copies = (load_config(source).num_hidden_layers - known.first) // known.period
    journal = depth.extend_like(known.shape, tracker.journal, copies)
    return None if journal is None else (StorageTracker.replay(journal), known.full, known.rerouted)


def _by_depth(row: RowSpec, source: ModelSource, program: Program, layers: int, start: tuple[int, int],
              small: SmallDepths) -> Simulated | None:
    (first, period), runs = start, []
    copies = (layers - first) // period  # a whole number: stack.periods
    shape = None
    for extra in range(DEPTHS):  # a trace that does not repeat by its third depth costs no fourth
        runs.append(small(first + extra * period))
        if extra == 2:
            three = [tracker.journal for tracker, _, _ in runs]
            if not depth.repeats(three):
                return None
            shape = depth.shape(three) if _seen_repeat(row, source, program, start) else None  # three may do
            if shape is not None:
                break
    journals = [tracker.journal for tracker, _, _ in runs]
    shape = shape or depth.shape(journals)
    journal = None if shape is None else depth.extend_like(shape, journals[1], copies)
    if shape is None or journal is None:
        return None
    facts = [model_facts(prepared, row) for _, prepared, _ in runs]
    counts = [depth.arithmetic([getattr(f, name) for f in facts], copies)
              for name in ("parameters", "trainable", "quantization_bytes")]
    if None in counts or any(f.whole != facts[-1].whole for f in facts[1:]):  # a stack whose layers differ
        return None
    deepest = facts[-1]
    full = ModelFacts(*counts[:2], deepest.lora_targets, counts[2], deepest.whole, deepest.experts)  # type: ignore
    SHAPES[shape_key(row, source, program)] = KnownShape(first, period, shape, facts[1], full,
                                                         runs[-1][2])
    return StorageTracker.replay(journal), full, runs[-1][2]


def _seen_repeat(row: RowSpec, source: ModelSource, program: Program, start: tuple[int, int]) -> bool:
    """Whether this row's stack, from this start, was read at another batch in this process. Every shape of a row
    descends from one read from four depths, so its trace was seen to repeat three times at an earlier batch, and
    at this one (which takes other paths: batch 1, or past it) three small depths may read the shape
    (depth.shape); a fourth is run only where they do not."""
    known = SHAPES.get(shape_key(row, source, program))
    return known is not None and (known.first, known.period) == start
