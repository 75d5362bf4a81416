"""The depth fast path starts only where every layer past its small depths is one they met (generator/predict/
stack.py): a stack with a layer of another kind further down takes the full depth, where the small depths alone
answered wrongly; a stack that begins with layers of another kind starts its small depths where it turns
uniform, and one whose layers repeat in a period steps a period at a time, each equal to the full simulation."""

import json
from dataclasses import replace
from pathlib import Path
from unittest import mock

import pytest
from conftest import TESTS

from generator.matrix import parse_row
from generator.model_source import ModelSource, resolve_model
from generator.predict.exact.parts import PROGRAMS
from generator.predict.fast import stack
from generator.predict.fast.small_depths import SHAPES, simulate_by_depth, simulate_full, simulate_like

pytestmark = pytest.mark.slow  # simulates configs at scale or starts processes that import torch

QWEN2_MOE = json.loads((TESTS / "architectures" / "qwen2_moe.json").read_text())
GEMMA3 = {"model_type": "gemma3_text", "hidden_size": 64, "intermediate_size": 128, "num_attention_heads": 4,
          "num_key_value_heads": 2, "head_dim": 16, "num_hidden_layers": 8, "vocab_size": 1024,
          "max_position_embeddings": 512, "sliding_window": 8}  # its sixth layer is global, the rest sliding


def _source(folder: Path, name: str, config: dict) -> ModelSource:
    path = folder / f"{name}.json"
    path.write_text(json.dumps(config))
    return resolve_model(str(path))


@pytest.fixture(autouse=True)
def _no_shapes_kept() -> None:
    SHAPES.clear()


def _peaks(source: ModelSource, row_id: str, program: str, check: bool = True) -> tuple[int | None, int]:
    """The fast path's tensor peak (None where it gives no answer), with or without the layer check, and the
    full simulation's."""
    row, chosen = parse_row(row_id), PROGRAMS[program]
    SHAPES.clear()
    with mock.patch.object(stack, "repeats_past", stack.repeats_past if check else lambda *_: True):
        fast = simulate_by_depth(row, source, chosen)
    return None if fast is None else fast[0].peak, simulate_full(row, source, chosen, fast=False)[0].peak


@pytest.mark.parametrize(("name", "config", "row_id"), [
    ("dense-sixth", {**QWEN2_MOE, "num_hidden_layers": 8, "mlp_only_layers": [5]}, "train-b2-s16"),
    ("gemma3", GEMMA3, "gen-b2-s16-n4-bf16"),
    ("gemma3", GEMMA3, "train-b2-s16"),
])
def test_a_layer_the_small_depths_never_met_takes_the_full_depth(name: str, config: dict, row_id: str,
                                                                  tmp_path: Path) -> None:
    """Without the check the small depths answer, and wrongly; with it, there is no fast answer."""
    source = _source(tmp_path, name, config)
    assert not stack.repeats_past(source, 1, 4) and not stack.repeats_past(source, 2, 4)
    for program in PROGRAMS:
        unchecked, full = _peaks(source, row_id, program, check=False)
        assert unchecked is not None and unchecked != full, f"{row_id} ({program}): the check has nothing to catch"
        assert _peaks(source, row_id, program) == (None, full)


def test_the_small_depths_miss_a_global_layer_low(tmp_path: Path) -> None:
    """Gemma 3's global layer, answered as a sliding one, made a generation's peak too low (its KV cache keeps
    the whole prompt, a sliding layer's only the window): the unsafe side."""
    source = _source(tmp_path, "gemma3", GEMMA3)
    for program in PROGRAMS:
        unchecked, full = _peaks(source, "gen-b2-s16-n4-bf16", program, check=False)
        assert unchecked is not None and unchecked < full, program


def test_a_stack_that_turns_uniform_starts_its_small_depths_there(tmp_path: Path) -> None:
    source = _source(tmp_path, "dense-first", {**QWEN2_MOE, "num_hidden_layers": 10, "mlp_only_layers": [0, 1, 2]})
    assert stack.uniform_from(source) == 3
    for program in PROGRAMS:
        fast, full = _peaks(source, "train-b2-s16", program)
        assert fast == full, program
        assert SHAPES and all(known.first == 3 for known in SHAPES.values())


def test_a_signature_is_the_same_for_every_layer_of_a_plain_stack_but_not_its_index(tmp_path: Path) -> None:
    source = _source(tmp_path, "llama", {**json.loads((TESTS / "architectures" / "llama.json").read_text()),
                                         "num_hidden_layers": 6})
    found = stack.signatures(source)
    assert found is not None and len(found) == 6 and len(set(found)) == 1
    assert stack.signatures(source, 3) == found[:3]
    assert stack.uniform_from(source) == 0 and stack.repeats_past(source, 1, 4)


def _trace(found: tuple) -> tuple:
    tracker = found[0]
    return tracker.peak, [(size, made) for _, size, made in tracker.events], tracker.phase_marks, found[1]


@pytest.mark.parametrize(("name", "config", "start"), [
    ("moe-every-other", {**QWEN2_MOE, "num_hidden_layers": 10, "decoder_sparse_step": 2}, (2, 2)),
    ("gemma3-32", {**GEMMA3, "num_hidden_layers": 32}, (8, 6)),  # past its first global layer, six at a time
])
def test_a_stack_that_repeats_in_a_period_steps_a_period_at_a_time(name: str, config: dict, start: tuple[int, int],
                                                                   tmp_path: Path) -> None:
    """The small depths a period apart answer as the full simulation does, trace for trace, and so does another
    batch from the shape they read (one small depth: the first plus a period)."""
    source = _source(tmp_path, name, config)
    assert stack.periods(source) == [start]
    row = parse_row("gen-b2-s16-n4-bf16")
    for program, chosen in PROGRAMS.items():
        SHAPES.clear()
        fast = simulate_by_depth(row, source, chosen)
        assert fast is not None and _trace(fast) == _trace(simulate_full(row, source, chosen, fast=False)), program
        assert [(known.first, known.period) for known in SHAPES.values()] == [start]
        other = replace(row, batch_size=5)
        like = simulate_like(other, source, chosen)
        assert like is not None and _trace(like) == _trace(simulate_full(other, source, chosen, fast=False)), program


def test_a_lora_target_that_names_one_layer_marks_it_apart(tmp_path: Path) -> None:
    """A target given by its path (peft matches the end of a module's path) adapts one layer, which the small
    depths never build: without the check they answered with its adapter missing (and, with it the only target,
    peft refused the small depths' model); with it, the full depth answers."""
    llama = {**json.loads((TESTS / "architectures" / "llama.json").read_text()), "num_hidden_layers": 8}
    plain = _source(tmp_path, "llama", llama)
    row = parse_row("train-b2-s16-lora8")
    for targets in (("q_proj", "layers.6.mlp.down_proj"), ("layers.6.mlp.down_proj",)):
        source = replace(plain, lora_targets=targets)
        assert not stack.repeats_past(source, 1, 4) and not stack.repeats_past(source, 2, 4)
        full = simulate_full(row, source, PROGRAMS["cpu"], fast=False)
        assert simulate_by_depth(row, source, PROGRAMS["cpu"]) is None
        SHAPES.clear()
        with mock.patch.object(stack, "repeats_past", lambda *_: True):
            if len(targets) == 1:
                with pytest.raises(Exception, match="not found in the base model"):  # peft's NoMatchingPeftModuleError
                    simulate_by_depth(row, source, PROGRAMS["cpu"])
                continue
            unchecked = simulate_by_depth(row, source, PROGRAMS["cpu"])
        assert unchecked is not None and unchecked[1].trainable < full[1].trainable
    assert stack.repeats_past(replace(plain, lora_targets=("q_proj", "down_proj")), 1, 4)  # every layer alike
