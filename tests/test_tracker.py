"""A tracker replayed from its journal (generator/predict/exact/tracker.py) is the whole replay, figure for figure: the
lean pass that gives the tensor peak, its phase and the allocator's trace equals StorageTracker's own entries, on
journals Hypothesis writes and on every architecture's real runs, and every other figure comes from the whole
replay."""

import pytest
from conftest import TESTS
from hypothesis import example, given, settings
from hypothesis import strategies as st

from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict.exact.cuda_program import CPU, CUDA
from generator.predict.exact.tracker import Replayed, StorageTracker
from generator.predict.fast.small_depths import fast_run as _run

ARCHITECTURES = sorted((TESTS / "architectures").glob("*.json"))
FIGURES = ("peak", "peak_phase", "peak_split", "phase_peaks", "events", "event_kinds", "phase_marks", "journal",
           "total", "totals", "sizes", "kinds")


def _same(journal: list[tuple]) -> None:
    whole, replayed = StorageTracker.replay_whole(journal), StorageTracker.replay(journal)
    assert isinstance(replayed, Replayed)
    lean = (replayed.peak, replayed.peak_phase, replayed.events)
    assert lean == (whole.peak, whole.peak_phase, whole.events)
    assert all(getattr(replayed, name) == getattr(whole, name) for name in FIGURES)


@st.composite
def journals(draw: st.DrawFn) -> list[tuple]:
    """Entries a tracker writes: storages made (of a kind), re-kinded and freed while live, phases entered."""
    journal: list[tuple] = []
    live: list[int] = []
    for number, step in enumerate(draw(st.lists(st.sampled_from(("made", "freed", "kind", "phase")), max_size=60))):
        if step == "made" or (step in ("freed", "kind") and not live):
            size = draw(st.integers(0, 5000))
            journal.append(("made", number, size, draw(st.sampled_from(("weights", "activations", "optimizer")))))
            live.append(number)
        elif step == "freed":
            journal.append(("freed", live.pop(draw(st.integers(0, len(live) - 1)))))
        elif step == "kind":
            journal.append(("kind", draw(st.sampled_from(live)), "gradients"))
        else:
            journal.append(("phase", draw(st.sampled_from(("forward", "backward", "optimizer step")))))
    return journal


@settings(max_examples=300, deadline=None)
@given(journals())
@example([("made", 1, 10, "weights"), ("phase", "forward"), ("made", 2, 5, "activations"), ("freed", 2),
          ("phase", "backward"), ("made", 3, 5, "activations")])  # the peak again, later: its phase stays the first
def test_the_lean_pass_gives_the_whole_replays_peak_phase_and_trace(journal: list[tuple]) -> None:
    _same(journal)


@pytest.mark.parametrize("path", ARCHITECTURES, ids=lambda path: path.stem)
def test_a_replayed_tracker_is_the_whole_replay_on_every_architecture(path) -> None:
    source = resolve_model(str(path))
    for row_id, program in (("train-b2-s16-amp", CUDA), ("gen-b2-s16-n4-bf16", CUDA), ("train-b2-s16-lora8", CPU)):
        tracker, _, _ = _run(parse_row(row_id), source, program)
        _same(tracker.journal)


def test_a_gpu_part_reads_only_the_lean_pass_and_equals_the_whole_replays() -> None:
    """The GPU's part (its tensor peak, phase and reserves) is made from the lean pass alone, and is the part the
    whole replay gives; the CPU's reads the split, from the whole replay."""
    from generator.predict.exact.parts import _cpu_part, _cuda_part
    from generator.predict.exact.run import model_facts
    from generator.predict.simulate import METHOD

    row = parse_row("train-b2-s16-amp")
    tracker, prepared, _ = _run(row, resolve_model(str(ARCHITECTURES[0])), CUDA)
    facts = model_facts(prepared, row)
    replayed = StorageTracker.replay(tracker.journal)
    gpu = _cuda_part(replayed, facts, row, METHOD, 0.0)
    assert "_whole" not in vars(replayed)
    assert gpu == _cuda_part(StorageTracker.replay_whole(tracker.journal), facts, row, METHOD, 0.0)
    assert _cpu_part(replayed, facts, row, METHOD, 0.0) == _cpu_part(tracker, facts, row, METHOD, 0.0)
    assert "_whole" in vars(replayed)
