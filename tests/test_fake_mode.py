"""The simulation's FakeTensorMode (generator/predict/fast/fake_mode.py) against the plain one it replaced, a
FakeTensorMode with the tracker's dispatch mode stacked on it: the journals are the same, entry for entry, on each
of the 14 architectures in tests/architectures/ for every set-up the answers are given for (CUDA's program), and
on the tiny Llama for the CPU's program too, the simulation's run with Python's cyclic collector paused (as
simulate_part runs it) and the plain one's with it on; and every operator answered by the learnt key has the
FakeTensorMode key that was learnt with it (``CHECK_KEYS``), a check shown to catch a key that misses what tells
two calls apart."""

from pathlib import Path
from typing import Any

import pytest
from conftest import TESTS

from generator.answers.setups import KINDS
from generator.matrix import RowSpec, parse_row
from generator.model_source import ModelSource, resolve_model
from generator.predict.exact import run as fake_run
from generator.predict.exact.cuda_program import CPU, CUDA, Program
from generator.predict.exact.tracker import StorageTracker
from generator.predict.fast import fake_mode, small_depths
from generator.predict.fast.batches import indexed
from generator.predict.simulate import collector_paused

ARCHITECTURES = sorted((TESTS / "architectures").glob("*.json"))
ROWS = [template.format(b=2, s=16) for template in KINDS.values()]


@pytest.fixture(autouse=True)
def _keys_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fake_mode, "CHECK_KEYS", True)


def _outcome(row: RowSpec, source: ModelSource, program: Program, run: Any) -> Any:
    """The run, or why it failed (Falcon's attention has no nn.Linear for a 4-bit row, say)."""
    try:
        return run(row, source, program)
    except Exception as error:  # torch, transformers, peft and bitsandbytes fail with exceptions of many types
        return f"{type(error).__name__}: {error}"


def _same(config: Path, row_id: str, program: Program, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path's mode (small_depths.fast_run at full depth) against the reference's (exact/run.py run_fake,
    a plain FakeTensorMode with the tracker's dispatch mode stacked on it)."""
    row, source = parse_row(row_id), resolve_model(str(config))
    with collector_paused():  # as simulate_part runs: the plain mode's run below has the collector on
        inside = _outcome(row, source, program, small_depths.fast_run)
    stacked = _outcome(row, source, program, fake_run.run_fake)
    if isinstance(inside, str) or isinstance(stacked, str):  # a row the architecture cannot run fails alike
        assert inside == stacked, (config.stem, row_id)
        return
    assert indexed(inside[0].journal) == indexed(stacked[0].journal), (config.stem, row_id)
    assert (inside[0].peak, inside[0].phase_peaks, inside[2]) == (stacked[0].peak, stacked[0].phase_peaks, stacked[2])


@pytest.mark.parametrize("config", ARCHITECTURES, ids=[path.stem for path in ARCHITECTURES])
@pytest.mark.slow  # simulates every architecture, or measures twice
def test_the_simulations_fake_mode_gives_the_plain_ones_journal(config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for row_id in ROWS:
        _same(config, row_id, CUDA, monkeypatch)
    assert any(learnt is not fake_mode.SKIP for learnt in fake_mode.LEARNT.values())  # answers were learnt


@pytest.mark.parametrize("row_id", ROWS)
@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_the_cpu_program_too(row_id: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _same(TESTS / "architectures" / "llama.json", row_id, CPU, monkeypatch)


def test_tracking_stops_when_the_steps_end() -> None:
    """Operators on the run's fake tensors after it (reading the model's counts) are not journal entries."""
    import torch

    tracker = StorageTracker()
    fake = fake_mode.tracking_fake_mode(tracker)
    with fake:
        kept = torch.ones(4)
        with fake.tracking_on():
            made = kept * 2
        after = kept * 3
    assert [entry[0] for entry in tracker.journal] == ["made"]
    assert tracker.sizes == {id(made.untyped_storage()): 16}
    assert after.untyped_storage().nbytes() == 16


def test_the_check_catches_a_key_that_misses_a_difference(monkeypatch: pytest.MonkeyPatch) -> None:
    """A key that holds only each tensor's sizes takes a bf16 product for the fp32 one learnt before it: the
    check refuses the answer (without the check it would be the fp32 product's, 16 bytes where bf16 makes 8)."""
    import torch

    def sizes_only(mode: Any, func: Any, args: Any, kwargs: Any) -> tuple[Any, ...] | None:
        key = original(mode, func, args, kwargs)
        return None if key is None else tuple(part[1] if isinstance(part, tuple) and part and
                                              isinstance(part[0], torch.dtype) else part for part in key)

    original = fake_mode.call_key
    monkeypatch.setattr(fake_mode, "call_key", sizes_only)
    monkeypatch.setattr(fake_mode, "LEARNT", {})
    with fake_mode.tracking_fake_mode(StorageTracker()):
        torch.ones(4) * torch.ones(4)
        halves = torch.ones(4, dtype=torch.bfloat16)
        with pytest.raises(AssertionError, match="another FakeTensorMode key"):
            halves * halves


def test_the_check_catches_an_output_made_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """An output made directly from a learnt entry (fake_hits.py, point 7) with another dtype than the entry's is
    refused by the check, which compares it with FakeTensorMode's own output of the entry."""
    import dataclasses

    import torch

    from generator.predict.fast import fake_hits

    def wrong_dtype(mode: Any, made: Any, viewed: Any, found: Any) -> Any:
        return directly(mode, dataclasses.replace(made, dtype=torch.float64), viewed, found)

    directly = fake_hits._made_directly
    monkeypatch.setattr(fake_hits, "_made_directly", wrong_dtype)
    monkeypatch.setattr(fake_mode, "LEARNT", {})
    with fake_mode.tracking_fake_mode(StorageTracker()):
        ones = torch.ones(4)
        ones * ones  # learnt: FakeTensorMode's own output
        with pytest.raises(AssertionError, match="made directly is not FakeTensorMode's"):
            ones * ones


def test_the_check_catches_an_output_given_other_attributes(monkeypatch: pytest.MonkeyPatch) -> None:
    """After a mode's first output, each next one is given the attributes FakeTensor's constructor gave that one
    (fake_hits._wrapped); one given another is refused by the check."""
    import torch

    monkeypatch.setattr(fake_mode, "LEARNT", {})
    mode = fake_mode.tracking_fake_mode(StorageTracker())
    with mode:
        ones = torch.ones(4)
        ones * ones  # learnt
        ones * ones  # from the entry, by the constructor: its attributes are kept
        assert mode.made_attributes is not None and mode.made_attributes["fake_mode"] is mode
        ones * ones  # given them
        mode.made_attributes["pytype"] = float
        with pytest.raises(AssertionError, match="made directly is not FakeTensorMode's"):
            ones * ones


def test_the_check_catches_a_constant_read_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """A constant's value read directly (fake_hits.py, point 6), as AdamW reads its step counters, must be the one
    FakeTensorMode's constant propagation gives; one read wrong is refused by the check."""
    import torch

    from generator.predict.fast import fake_hits

    with fake_mode.tracking_fake_mode(StorageTracker()):
        step = torch.tensor(3.0)
        assert step.item() == 3.0
        monkeypatch.setattr(fake_hits, "_constant_value", lambda func, tensor, found: 4.0)
        with pytest.raises(AssertionError, match="read directly is not FakeTensorMode's"):
            step.item()


QLORA_ROW = KINDS["QLoRA"].format(b=2, s=16)


def _learnt_custom() -> dict[tuple[Any, ...], Any]:
    return {key: learnt for key, learnt in fake_mode.LEARNT.items()
            if learnt is not fake_mode.SKIP and learnt[0] == fake_mode.FRESH}


@pytest.mark.parametrize("checked", [True, False], ids=["checked", "as fit runs"])
def test_bitsandbytes_operators_are_learnt_and_give_the_plain_journal(checked: bool,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """A QLoRA step's 4-bit matmuls and (de)quantizations and its AdamW's foreach square roots, which
    FakeTensorMode never caches, are answered from what was learnt of their outputs (run twice: the second run is
    answered so), with the plain journal; both with the check, which runs each call too, and without it, as
    predict and fit run."""
    monkeypatch.setattr(fake_mode, "LEARNT", {})
    monkeypatch.setattr(fake_mode, "CHECK_KEYS", checked)
    for _ in range(2):
        _same(TESTS / "architectures" / "llama.json", QLORA_ROW, CUDA, monkeypatch)
    assert {key[0].namespace for key in _learnt_custom()} == {"bitsandbytes", "aten"}
    assert {key[0].name() for key in _learnt_custom() if key[0].namespace == "aten"} == {"aten::_foreach_sqrt"}


def test_the_check_catches_a_custom_operator_learnt_wrong(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs learnt with another dtype than the call makes are refused by the check."""
    import torch

    monkeypatch.setattr(fake_mode, "LEARNT", {})
    row, source = parse_row(QLORA_ROW), resolve_model(str(TESTS / "architectures" / "llama.json"))
    small_depths.fast_run(row, source, CUDA)
    for key, (_, (returned, specs)) in _learnt_custom().items():
        fake_mode.LEARNT[key] = (fake_mode.FRESH, (returned, tuple((*spec[:2], torch.float64, spec[3])
                                                                    for spec in specs)))
    with pytest.raises(AssertionError, match="made other tensors"):
        small_depths.fast_run(row, source, CUDA)


def test_a_key_made_before_the_call_is_handed_over_once_and_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    """The key _learn made for a call is what FakeTensorMode gets for that call (not made again), only for that
    call and only once; the check refuses one that is not FakeTensorMode's."""
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode, _CacheKeyState

    made: list[Any] = []
    real = FakeTensorMode._cache_key
    monkeypatch.setattr(FakeTensorMode, "_cache_key", lambda self, *rest: made.append(rest[1]) or real(self, *rest))
    monkeypatch.setattr(fake_mode, "CHECK_KEYS", False)
    mode = fake_mode.tracking_fake_mode(None)
    add, args = torch.ops.aten.add.Tensor, (1, 2)
    mode.pending_key = (add, args, {}, "handed over")
    assert mode._cache_key(_CacheKeyState(None), add, args, {}) == "handed over" and made == []
    assert mode._cache_key(_CacheKeyState(None), add, args, {}) != "handed over"  # once: then FakeTensorMode's
    mode.pending_key = (add, tuple([1, 2]), {}, "handed over")  # another call, though alike: FakeTensorMode's own key
    assert mode._cache_key(_CacheKeyState(None), add, args, {}) != "handed over"
    assert made == [add, add]
    monkeypatch.setattr(fake_mode, "CHECK_KEYS", True)
    mode.pending_key = (add, args, {}, "not its key")
    with pytest.raises(AssertionError, match="not FakeTensorMode's"):
        mode._cache_key(_CacheKeyState(None), add, args, {})


def _plain_values() -> Any:
    """Arguments of the plain types (fake_mode's ``found.plain``), nested in lists, tuples and dicts as operators
    take them."""
    import torch
    from hypothesis import strategies as st

    leaves = st.one_of(st.integers(), st.floats(allow_nan=False), st.booleans(), st.none(), st.text(max_size=3),
                       st.sampled_from([torch.float32, torch.bfloat16, torch.device("cpu"), torch.device("cuda", 0),
                                        torch.strided, torch.contiguous_format]))
    return st.recursive(leaves, lambda inner: st.one_of(st.lists(inner, max_size=3), st.tuples(inner, inner),
                                                        st.dictionaries(st.text(max_size=2), inner, max_size=2)),
                        max_leaves=8)


def test_a_plain_argument_is_keyed_as_the_general_path_keys_it() -> None:
    """The shortcut for an argument of a plain type appends what the general path's last line appends: keys made
    with it and without it (``plain`` emptied) are equal, for any nesting of such arguments beside a fake tensor."""
    import torch
    from hypothesis import given, settings

    found = fake_mode._torch()
    general = type(found)(**{**vars(found), "plain": frozenset()})
    with fake_mode.tracking_fake_mode(StorageTracker()) as mode:
        tensor = torch.ones(2, 3)

    @settings(max_examples=300, deadline=None)
    @given(_plain_values())
    def keyed_alike(value: Any) -> None:
        shortcut: list[Any] = []
        everywhere: list[Any] = []
        added = (fake_mode._add(mode, (tensor, value), shortcut, found),
                 fake_mode._add(mode, (tensor, value), everywhere, general))
        assert added[0] == added[1] and shortcut == everywhere

    keyed_alike()
