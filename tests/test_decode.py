"""The decode fast path (generator/predict/fast/decode.py) is the full run, byte for byte: a generation row's journal
written from two short runs is the journal of the run that decodes every token, entry for entry (each with the
bytes of the storage it names, and naming the same storage), on each of the 14 architectures in
tests/architectures/, for both programs. A KV cache that stops growing between the short runs' positions (a
sliding window) fails the late run's check, so the row is run in full."""

import json
from pathlib import Path

import pytest
from conftest import TESTS

from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict.exact.parts import PROGRAMS
from generator.predict.fast import decode
from generator.predict.fast.depth import _tokens
from generator.predict.fast.small_depths import decoded
from generator.predict.fast.small_depths import fast_run as _run

ARCHITECTURES = sorted((TESTS / "architectures").glob("*.json"))


def _entries(tracker: object) -> tuple:
    return _tokens(tracker.journal)  # type: ignore[attr-defined]


def _same(path: Path, row_id: str) -> None:
    """The fast path answers the row for both programs, with the journal of the run of every token."""
    source, row = resolve_model(str(path)), parse_row(row_id)
    for name, program in PROGRAMS.items():
        fast = decoded(row, source, program)
        assert fast is not None, f"{row_id} ({name}) on {path.stem}: no fast answer"
        assert _entries(fast[0]) == _entries(_run(row, source, program)[0]), f"{row_id} ({name}) on {path.stem}"


@pytest.mark.parametrize("path", ARCHITECTURES, ids=lambda path: path.stem)
@pytest.mark.slow  # simulates at scale or starts real processes
def test_the_decode_path_is_the_full_run_on_every_architecture(path: Path) -> None:
    _same(path, "gen-b2-s16-n32-bf16")


@pytest.mark.parametrize("model", ["llama", "gpt2", "gemma2"])
@pytest.mark.slow  # simulates at scale or starts real processes
def test_the_decode_path_is_the_full_run_at_batch_1_and_other_lengths(model: str) -> None:
    """A batch of one takes other paths (views where two copy); a longer prompt and fewer new tokens."""
    _same(TESTS / "architectures" / f"{model}.json", "gen-b1-s40-n12-bf16")


@pytest.mark.parametrize(("model", "window", "fast"), [("mistral", 30, False), ("gemma2", 45, False),
                                                      ("mistral", 60, True)])
@pytest.mark.slow  # simulates at scale or starts real processes
def test_a_cache_that_stops_growing_on_the_way_is_run_in_full(model: str, window: int, fast: bool,
                                                               tmp_path: Path) -> None:
    """A sliding window of 30 or 45 positions is reached between the early run's decode steps (17 to 21
    positions) and the late run's (44 to 48): the late check fails, so run_row runs every token; a window of 60
    is never reached, and the fast path answers, with the journal of the run of every token."""
    config = {**json.loads((TESTS / "architectures" / f"{model}.json").read_text()), "sliding_window": window}
    (tmp_path / "config.json").write_text(json.dumps(config))
    source, row = resolve_model(str(tmp_path / "config.json")), parse_row("gen-b2-s16-n32-bf16")
    for program in PROGRAMS.values():
        found = decoded(row, source, program)  # run_row runs every token where this is None
        assert (found is not None) == fast
        if found is not None:
            assert _entries(found[0]) == _entries(_run(row, source, program)[0])


def test_a_row_of_few_new_tokens_is_run_as_it_is() -> None:
    source = resolve_model(str(TESTS / "tiny-llama.json"))
    assert decoded(parse_row(f"gen-b1-s16-n{2 * decode.SHORT - 1}-bf16"), source, PROGRAMS["cpu"]) is None
    assert decoded(parse_row("train-b1-s16"), source, PROGRAMS["cpu"]) is None


def test_decode_steps_that_are_not_alike_get_no_fast_answer() -> None:
    """A stand-in journal: the third decode step makes a storage the others do not."""
    step = [("made", 1, 100, "activations"), ("freed", 1)]
    odd = [("made", 2, 100, "activations"), ("made", 3, 7, "activations"), ("freed", 2), ("freed", 3)]
    journal, marks = [("phase", "forward")], []
    for number in range(decode.SHORT):
        marks.append(len(journal))
        journal += odd if number == 3 else step
    assert decode.extend(journal, marks, journal, marks, 1, 32) is None
    marks = []
    steady: list[tuple] = [("phase", "forward")]
    for _ in range(decode.SHORT):
        marks.append(len(steady))
        steady += step
    assert decode.extend(steady, marks, steady, marks, 1, 32) == [
        ("phase", "forward"), *[entry for index in range(1, 64, 2) for entry in (("made", index, 100, "activations"),
                                                                                  ("freed", index))]]
