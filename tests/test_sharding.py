"""Sharded rows: one card's share of the simulated trace, checked against the unsharded trace it replays and
against DeepSpeed's estimator for ZeRO-3 model states."""

import pytest
from conftest import TINY_MODEL

from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict.exact.sharding import per_card
from generator.predict.exact.tracker import StorageTracker
from generator.predict.simulate import simulate


def _traced(row_id: str) -> StorageTracker:
    """The tracker of a simulation of the tiny llama, kept for replays (fake_run makes each run's tracker)."""
    import generator.predict.exact.run as simulation

    kept: list[StorageTracker] = []
    original = simulation.StorageTracker

    class Keeping(original):  # type: ignore[misc, valid-type]
        def __init__(self) -> None:
            super().__init__()
            kept.append(self)

    simulation.StorageTracker = Keeping  # type: ignore[misc]
    try:
        simulate(parse_row(row_id), resolve_model(str(TINY_MODEL)))
    finally:
        simulation.StorageTracker = original  # type: ignore[misc]
    return kept[0]


@pytest.mark.parametrize("row_id", ["train-b2-s64", "train-b2-s64-lora8", "gen-b1-s32-n4", "train-b2-s64-amp"])
def test_a_card_that_shards_nothing_replays_the_whole_run(row_id: str) -> None:
    """The replay at one card's sizes is the tracker's own run when nothing is sharded: same peak, phase,
    per-phase peaks and trace, so a sharded figure differs from an unsharded one only by the sharing."""
    tracker = _traced(row_id)
    card = per_card(tracker, parse_row(row_id))
    assert (card.peak, card.phase, card.phase_peaks) == (tracker.peak, tracker.peak_phase, tracker.phase_peaks)
    assert card.events == tracker.events
    assert sum(card.split.values()) == card.peak


def _deepspeed_zero3_gpu_bytes(total_params: int, largest_layer_memory: int, gpus: int,
                               bytes_per_parameter: int = 18) -> int:
    """DeepSpeed's estimate_zero3_model_states_mem_needs without offload (deepspeed/runtime/zero/stage3.py):
    ``largest_layer_memory + int(18 * total_params / total_gpus)``: what a card holds whole beside the shards of
    every parameter's states. Its recipe is fp16 with fp32 master weights (18 bytes a parameter; the largest
    layer at 4 bytes a parameter, its fp16 weight and gradient). The bytes a parameter and the whole part are
    arguments here so that the recipe a row simulates can be put in their place."""
    return largest_layer_memory + int(bytes_per_parameter * total_params / gpus)


# tiny-llama.json by hand: a decoder layer is q, k, v, o (64×64, 32×64, 32×64, 64×64), gate, up, down (128×64
# each) and two norms of 64; the root is the tied 1,024 × 64 embedding and the final norm.
LAYER = 64 * 64 * 2 + 32 * 64 * 2 + 128 * 64 * 3 + 2 * 64  # 36,992 parameters
ROOT = 1024 * 64 + 64  # 65,600: the largest unit
PARAMETERS = ROOT + 2 * LAYER  # 139,584


@pytest.mark.parametrize("gpus", [2, 4])
def test_zero3_model_states_follow_deepspeeds_formula(gpus: int) -> None:
    """Full fp32 training keeps 16 bytes a parameter (weights, gradients, AdamW's two moments), each sharded under
    ZeRO-3. What a card holds whole, in place of DeepSpeed's largest-layer term: the fp32 weights of its two
    largest units (the one computing and the one prefetched) and the fp32 gradients of the largest, made whole
    by backward before their reduce-scatter. Every figure is counted by hand from the config, and every tensor of
    the tiny model divides by 2 and 4, so the formula holds to the byte."""
    card = simulate(parse_row(f"train-b2-s64-zero3x{gpus}"), resolve_model(str(TINY_MODEL)))
    states = card.weights_bytes + card.gradients_bytes + card.optimizer_bytes
    whole = 4 * (ROOT + LAYER) + 4 * ROOT
    assert card.parameters == PARAMETERS
    assert states == _deepspeed_zero3_gpu_bytes(PARAMETERS, whole, gpus, bytes_per_parameter=16)


@pytest.mark.parametrize("sharding, sharded", [("ddp", ()), ("zero1", ("optimizer",)),
                                               ("zero2", ("optimizer", "gradients")),
                                               ("zero3", ("optimizer", "gradients", "weights")),
                                               ("fsdp", ("optimizer", "gradients", "weights"))])
def test_each_stage_shares_only_what_it_shards(sharding: str, sharded: tuple[str, ...]) -> None:
    """A stage divides the kinds it shards by the cards and keeps the rest; where it shards gradients a card also
    holds the largest unit's gradients whole (before their reduce-scatter), and where it shards weights the two
    largest units' weights whole (gathered), in fp32 here: 4 bytes a parameter."""
    whole = simulate(parse_row("train-b2-s64"), resolve_model(str(TINY_MODEL)))
    card = simulate(parse_row(f"train-b2-s64-{sharding}x4"), resolve_model(str(TINY_MODEL)))
    held_whole = {"weights": 4 * (ROOT + LAYER), "gradients": 4 * ROOT, "optimizer": 0}
    for kind in ("weights", "gradients", "optimizer"):
        expected = getattr(whole, f"{kind}_bytes") // 4 + held_whole[kind] if kind in sharded \
            else getattr(whole, f"{kind}_bytes")
        assert getattr(card, f"{kind}_bytes") == expected, kind
    assert (whole.weights_bytes, whole.gradients_bytes, whole.optimizer_bytes) == (
        4 * PARAMETERS, 4 * PARAMETERS, 8 * PARAMETERS)
    assert card.tensor_peak_bytes <= whole.tensor_peak_bytes
    assert "one card's share" in card.method


@pytest.mark.parametrize("args, expected", [
    (["--sharding", "zero3"], "give --gpus 2 or more"),
    (["--gpus", "8", "--sharding", "zero3", "--target", "cpu"], "leave out --target cpu"),
    (["--gpus", "4096", "--target", "gpu"], "at most 1024"),
    (["--gpus", "8", "--sharding", "zero9", "--target", "gpu"], "invalid choice"),
    (["--gpus", "8", "--target", "gpu", "--confirm"], "--confirm measures two real steps on this machine"),
    (["--confirm"], "give --target cpu with it"),
    (["--record", "--gpus", "8"], "it takes no --budget, --gpus, --sharding or --with"),
    (["--record", "--with", "flce"], "it takes no --budget, --gpus, --sharding or --with"),
])
def test_fit_refuses_sharding_it_cannot_answer_in_one_line(tmp_path, args: list[str], expected: str) -> None:
    from conftest import run_cli

    result = run_cli("fit", "--model", str(TINY_MODEL), "--budget", "1GiB", "--measurements", str(tmp_path), *args)
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and expected in result.stderr, result.stderr


def test_measure_refuses_a_sharded_row(tmp_path) -> None:
    from conftest import run_cli

    result = run_cli("measure", "--model", str(TINY_MODEL), "--rows", "train-b1-s32-zero3x8",
                     "--output", str(tmp_path))
    assert result.returncode == 2 and "one machine cannot measure" in result.stderr and result.stderr.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_fit_answers_each_training_setup_for_one_card_of_several() -> None:
    """With --gpus, training set-ups answer with their per-card row; inference and generation run whole."""
    from generator.budget import ProcessModel
    from generator.predict.fit import Predictor, fit

    asked: list[str] = []

    def simulator(row, source):  # a card's peak: 1,000 bytes a sequence over the context
        from generator.store.records import Prediction

        asked.append(row.id)
        return Prediction(tensor_peak_bytes=1000 * row.batch_size, phase="step2", weights_bytes=0,
                          gradients_bytes=0, optimizer_bytes=0, activations_bytes=0, parameters=1,
                          trainable_parameters=1, method="", cuda_reserved_bytes=1000 * row.batch_size)

    model = ProcessModel(0.0, 0.0, 3, "a test's")
    answers = fit(Predictor(None, model, simulator, target="gpu", sharding=("zero2", 8)),  # type: ignore[arg-type]
                  256, 2**30, kinds=("full training", "generation"))
    assert answers[0].row.endswith("-zero2x8") and not answers[1].row.endswith("x8")
    assert all(row.endswith("-zero2x8") for row in asked if row.startswith("train"))


def test_the_pages_sharded_answers_follow_the_gpu_rule() -> None:
    """One card's curve, read like the GPU tables: reserve plus the context, within 80 GiB less the margin."""
    from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
    from generator.report.sharded import sharded_section
    from generator.store.fit_table import Curve, FitTable
    from generator.units import GIB

    usable = round(80 * GIB * 0.9) - CUDA_CONTEXT_BYTES
    per_sequence = 10 * GIB
    steps = (1, 2, 3, 4, 8)  # the curve holds the batch fit finds at the card and the one after it, as the page's do
    cuda = tuple(usable - 3 * per_sequence + per_sequence * b for b in steps)  # batch 3 fits exactly, 4 does not
    curve = Curve(model="Big", config_sha256="x", parameters=70, setup="bf16",
                  row="train-b{b}-s1024-bf16-zero3x8", batches=steps, tensor_bytes=cuda, cuda_bytes=cuda)
    never = Curve(model="Big", config_sha256="x", parameters=70, setup="amp",
                  row="train-b{b}-s1024-amp-zero1x8", batches=(1, 2), tensor_bytes=(100 * GIB, 200 * GIB),
                  cuda_bytes=(100 * GIB, 200 * GIB))
    section = sharded_section(FitTable(libraries="l", environment="e", seq_len=1024, curves=(), example=(),
                                       sharded=(curve, never)))
    assert section is not None and section.gpus == (8,) and section.model == "Big"
    first, second = section.rows
    assert first.answer == "batch 3 (72.0 GiB)" and first.global_batch == "24 sequences"
    assert first.stage.startswith("ZeRO-3") and second.stage.startswith("ZeRO-1")
    assert second.answer.startswith("does not fit") and second.global_batch == "–"


@pytest.mark.parametrize("key, value, reason", [
    ("sharding", "zero3", "simulated only"), ("gpus", 8, "simulated only"),
    ("optimizer", "sgd", "optimizer 'sgd' is not one of"), ("quantization", "int3", "quantization 'int3'"),
])
def test_a_result_file_with_coordinates_no_machine_measured_is_refused(key: str, value: object, reason: str) -> None:
    """A measured row runs on one machine with a known optimizer and base: anything else in a file is damage,
    refused with the file's name, never a traceback from deeper down."""
    import tomllib

    import tomli_w

    from generator.store.codec import parse
    from generator.store.records import ResultsError

    path = next((TINY_MODEL.parent.parent / "measurements").glob("*03cace/SmolLM2-135M-Instruct/train-b8-s256.toml"))
    document = tomllib.loads(path.read_text(encoding="utf-8"))
    document["row"][key] = value
    with pytest.raises(ResultsError, match=reason):
        parse(tomli_w.dumps(document), path)


def test_fit_leaves_out_the_setups_whose_library_is_missing_and_says_so(monkeypatch, capsys) -> None:
    import generator.cli.sharding as checks
    from generator.answers.setups import KINDS, SETUPS

    monkeypatch.setattr(checks, "find_spec", lambda name: None if name == "bitsandbytes" else object())
    kinds = checks.kinds_here()
    needing = [setup.name for setup in SETUPS if setup.library == "bitsandbytes"]
    assert set(needing) == {"QLoRA", "mixed precision, 8-bit AdamW", "QLoRA + checkpointing",
                            "memory-saver full fine-tune"}
    assert not set(needing) & set(kinds) and len(kinds) == len(KINDS) - len(needing)
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == len(needing) and all("bitsandbytes is not installed" in line for line in lines)
