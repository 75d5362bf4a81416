"""The batch fast path (generator/predict/fast/batches.py) is the simulation, byte for byte: on each of the 14
architectures in tests/architectures/, for every set-up the answers are given for and both programs, a row asked
at batch 2 and then 5 (where the line to the far batch is read, and checked at batch 3) gives at 5 the figures
and the trace that simulating that batch gives. A line is read only where its check lies on it, never for batch
1, and a row whose trace changes with the batch is simulated at every batch."""

import json
from dataclasses import replace
from itertools import groupby
from pathlib import Path

import pytest
from conftest import TESTS
from hypothesis import given
from hypothesis import strategies as st

from generator.answers.setups import KINDS
from generator.matrix import batch_limit, parse_row
from generator.model_source import ModelSource, resolve_model
from generator.predict.exact.parts import PROGRAMS, _cpu_part, _cuda_part
from generator.predict.exact.tracker import StorageTracker
from generator.predict.fast import batches, decode
from generator.predict.fast.small_depths import SHAPES, shape_key, simulate_full
from generator.predict.simulate import simulate_part

pytestmark = pytest.mark.slow  # simulates every architecture at several batches

ARCHITECTURES = sorted((TESTS / "architectures").glob("*.json"))
SETUP_ROWS = [*(template.format(b=2, s=16) for template in KINDS.values()), "train-b2-s16-amp-zero3x4"]


@pytest.fixture(autouse=True)
def _nothing_kept() -> None:
    """Each test reads its own lines and shapes."""
    batches.ROWS.clear()
    SHAPES.clear()


def _journal(batch: int, extra: int = 0) -> list[tuple]:
    """A stand-in run's journal: weights, an activation of 100 bytes a sequence, a temporary, their frees."""
    return [("made", 9000 + batch, 64, "weights"), ("phase", "forward"),
            ("made", 7000 + batch, 100 * batch + extra, "activations"),
            ("made", 5000 + batch, 8 * batch, "activations"),
            ("freed", 5000 + batch), ("kind", 9000 + batch, "weights"), ("freed", 7000 + batch)]


def _stand_in(asked: list[int], off_line_at: int = 0):
    def simulate(batch: int):
        asked.append(batch)
        journal = _journal(batch, extra=1 if batch == off_line_at else 0)
        return StorageTracker.replay(journal), "counts", False
    return simulate


def test_indexed_names_every_storage_by_the_entry_that_made_it() -> None:
    assert batches.indexed(_journal(3)) == [("made", 0, 64, "weights"), ("phase", "forward"),
                                            ("made", 2, 300, "activations"), ("made", 3, 24, "activations"),
                                            ("freed", 3), ("kind", 0, "weights"), ("freed", 2)]


def _two_passes(journal: list[tuple]) -> list[tuple]:
    """indexed as it was written before its one pass: decode.py's naming, its keying, then each run of frees
    sorted."""
    keyed = decode.keyed(decode.indexed(journal))
    assert keyed is not None
    settled: list[tuple] = []
    for freeing, run in groupby(keyed, key=lambda entry: entry[0] == "freed"):
        entries = list(run)
        settled.extend(sorted(entries) if freeing else entries)
    return settled


@st.composite
def _journals(draw: st.DrawFn) -> list[tuple]:
    """A tracker's journal: storages made under keys that are reused once freed, named, freed, between phases."""
    journal: list[tuple] = []
    live: list[int] = []
    for action in draw(st.lists(st.sampled_from(("made", "freed", "kind", "phase")), max_size=60)):
        free_keys = [key for key in range(6) if key not in live]
        if action == "made" and free_keys:
            live.append(draw(st.sampled_from(free_keys)))
            journal.append(("made", live[-1], draw(st.integers(0, 9)), draw(st.sampled_from(("a", "w")))))
        elif action in ("freed", "kind") and live:
            key = draw(st.sampled_from(live))
            journal.append(("freed", key) if action == "freed" else ("kind", key, "w"))
            if action == "freed":
                live.remove(key)
        elif action == "phase":
            journal.append(("phase", draw(st.sampled_from(("forward", "backward")))))
    return journal


@given(_journals())
def test_indexed_in_one_pass_is_the_naming_then_the_keying_and_the_sorted_frees(journal: list[tuple]) -> None:
    assert batches.indexed(journal) == _two_passes(journal)


def test_a_journal_that_names_a_storage_not_live_is_refused() -> None:
    with pytest.raises(ValueError, match="not live"):
        batches.indexed([("made", 1, 8, "a"), ("freed", 1), ("kind", 1, "w")])


def test_a_line_to_the_far_batch_is_read_at_the_second_batch_past_3_and_answers_the_others_without_a_run() -> None:
    asked: list[int] = []
    simulate = _stand_in(asked)
    batches.along("row", 1, 100, simulate)
    batches.along("row", 2, 100, simulate)
    tracker, counts, rerouted = batches.along("row", 40, 100, simulate)
    assert asked == [1, 2, 100, 3]  # the far batch and the check at 3 are run, not the batch asked
    assert tracker.journal == batches.indexed(_journal(40)) and (counts, rerouted) == ("counts", False)
    for batch in (3, 6, 77, 100):
        assert batches.along("row", batch, 100, simulate)[0].peak == StorageTracker.replay(_journal(batch)).peak
    assert asked == [1, 2, 100, 3]
    batches.along("row", 1, 100, simulate)  # batch 1 takes other paths: it is always simulated
    assert asked == [1, 2, 100, 3, 1]


def test_after_batches_2_and_3_the_line_through_them_is_read_at_the_third_and_checked_at_the_far_batch() -> None:
    asked: list[int] = []
    simulate = _stand_in(asked)
    for batch in (2, 3):
        batches.along("row", batch, 100, simulate)
    tracker, _, _ = batches.along("row", 40, 100, simulate)
    assert asked == [2, 3, 100] and tracker.journal == batches.indexed(_journal(40))
    assert batches.along("row", 9, 100, simulate)[0].peak == StorageTracker.replay(_journal(9)).peak
    assert asked == [2, 3, 100]


@pytest.mark.parametrize(("off_line_at", "asking", "expected"),
                         [(100, (2, 3, 5, 7), [2, 3, 100, 5, 7]), (3, (2, 6, 8), [2, 100, 3, 6, 8]),
                          (100, (2, 6, 8), [2, 100, 3, 6, 8])])
def test_a_check_off_the_line_leaves_every_batch_simulated(off_line_at: int, asking: tuple[int, ...],
                                                          expected: list[int]) -> None:
    asked: list[int] = []
    simulate = _stand_in(asked, off_line_at=off_line_at)
    for batch in asking:
        batches.along("row", batch, 100, simulate)
    assert asked == expected


def test_storages_freed_one_after_another_are_compared_in_the_order_they_were_made() -> None:
    """The CPU's autocast frees its cast copies in an order that differs from run to run; the line does not."""
    journal = _journal(2)
    swapped = [*journal[:4], ("freed", 5002), ("freed", 7002)]
    both = [*journal[:4], ("freed", 7002), ("freed", 5002)]
    assert batches.indexed(swapped) == batches.indexed(both) == [*batches.indexed(journal)[:4], ("freed", 2),
                                                                   ("freed", 3)]
    assert StorageTracker.replay(swapped).peak == StorageTracker.replay(both).peak


def test_two_journals_are_on_a_line_only_with_the_same_entries_and_whole_steps() -> None:
    two, three = batches.indexed(_journal(2)), batches.indexed(_journal(3))
    assert batches.through((2, two), (3, three)) == {0: 0, 2: 100, 3: 8}
    assert batches.through((2, two), (5, three)) is None  # 100 bytes over three sequences
    assert batches.through((2, two), (3, three[:-1])) is None
    swapped = [*three[:4], three[5], three[4], three[6]]
    assert batches.through((2, two), (3, swapped)) is None


def _figures(part) -> object:
    return replace(part, seconds=0.0)


def _one_layer(path: Path, folder: Path) -> ModelSource:
    """The architecture cut to one decoder layer: the batch path does not look at the depth, and a run costs less."""
    config = json.loads(path.read_text())
    config.update({key: 1 for key in ("num_hidden_layers", "n_layer") if key in config})
    (folder / path.name).write_text(json.dumps(config))
    return resolve_model(str(folder / path.name))


def _lines(source: ModelSource, row_id: str, name: str) -> bool:
    """Whether the row reads a line; wherever it answers from one (batch 5, after 2: the line to the far batch,
    checked at 3), the answer is the simulation's (each batch simulated, by the other fast paths where they
    answer)."""
    row = parse_row(row_id)
    try:
        simulate_part(row, source, name)
    except Exception as error:  # a set-up the architecture cannot run fails the same way when simulated
        with pytest.raises(type(error)):
            simulate_full(row, source, PROGRAMS[name])
        return False
    five = replace(row, batch_size=5)
    found = simulate_part(five, source, name)
    tracker, facts, _ = simulate_full(five, source, PROGRAMS[name])
    make = _cpu_part if name == "cpu" else _cuda_part
    expected = make(tracker, facts, five, found.method, 0.0)
    assert _figures(found) == _figures(expected), f"{five.id} ({name}) on {source.name}"
    known = batches.ROWS.get(shape_key(row, source, PROGRAMS[name]))
    return known is not None and known.line is not None and known.line.last == batch_limit(row.seq_len)


@pytest.mark.parametrize("path", ARCHITECTURES, ids=lambda path: path.stem)
def test_the_batch_path_is_the_simulation_on_every_architecture(path: Path, tmp_path: Path) -> None:
    """Every answer from a line is the simulation's, and every row reads one but those the architecture cannot
    run, so a row that stops reading a line fails here."""
    source = _one_layer(path, tmp_path)
    unlined = {(row_id, name) for row_id in SETUP_ROWS for name in PROGRAMS if not _lines(source, row_id, name)}
    print(path.stem, sorted(unlined))
    assert unlined == _cannot_run(path)


def _cannot_run(path: Path) -> set[tuple[str, str]]:
    """The set-ups an architecture cannot run: no line, and the same error at every batch. None now: Falcon's
    4-bit row, refused while quantize_nf4 skipped nn.Linear's subclasses (FalconLinear), runs."""
    return set()
