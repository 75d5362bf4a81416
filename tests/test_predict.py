"""predict: fake-tensor simulation of the rows, checked against P × bytes and against a real measurement."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TESTS, TINY_MODEL, run_cli

from generator.budget import fixed_costs
from generator.matrix import parse_row
from generator.model_source import ModelError, resolve_model
from generator.predict.simulate import simulate
from generator.steps import default_lora_targets
from generator.store.codec import load_file

WIDE_MODEL = TESTS / "wide-tiny-llama.json"
MIB = 2**20


@pytest.mark.parametrize("model", [str(TINY_MODEL), None])  # the tiny config and SmolLM2-135M
@pytest.mark.parametrize("row_id", ["train-b2-s64", "train-b2-s64-bf16"])
def test_weights_gradients_and_adamw_state_are_exact(model: str | None, row_id: str) -> None:
    row, source = parse_row(row_id), resolve_model(model)
    prediction = simulate(row, source)
    costs = fixed_costs(prediction.parameters, prediction.trainable_parameters, row.dtype, training=True)
    assert prediction.phase == "step2"
    assert (prediction.weights_bytes, prediction.gradients_bytes, prediction.optimizer_bytes) == (
        costs.weights, costs.gradients, costs.adamw_state)
    assert prediction.tensor_peak_bytes == costs.total + prediction.activations_bytes
    if model is None:
        assert prediction.parameters == 134_515_008


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_lora_trains_exactly_the_adapters() -> None:
    smol = simulate(parse_row("train-b1-s32-lora8"), resolve_model(None))
    assert smol.trainable_parameters == 460_800 and smol.lora_targets == "q_proj v_proj"
    tiny = simulate(parse_row("train-b1-s32-lora8"), resolve_model(str(TINY_MODEL)))
    assert tiny.trainable_parameters == 2 * (8 * (64 + 64) + 8 * (64 + 32))  # r × (in + out), q and v, 2 layers
    gpt2 = simulate(parse_row("train-b1-s32-lora8"), resolve_model("gpt2"))
    assert gpt2.lora_targets == "c_attn" == " ".join(default_lora_targets("gpt2"))
    assert gpt2.trainable_parameters == 12 * 8 * (768 + 3 * 768)  # c_attn: 768 -> 2304, 12 layers


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_a_real_measurement_agrees_with_its_prediction(tmp_path: Path) -> None:
    """Stated tolerance: the process holds at least its tensors (less 3 % for pages never touched), and at most
    15 % + 160 MiB more: glibc keeps freed activations, and the runtime's first use of kernels and library
    pages costs a fixed 50–120 MiB depending on the virtualenv."""
    rows = ["train-b4-s128", "infer-b8-s128"]
    measured = run_cli("measure", "--model", str(WIDE_MODEL), "--repeats", "1", "--rows", *rows,
                       "--output", str(tmp_path))
    assert measured.returncode == 0, measured.stderr
    predicted = run_cli("predict", "--model", str(WIDE_MODEL), "--rows", *rows, "--format", "json",
                        "--measurements", str(tmp_path), "--record")
    assert predicted.returncode == 0, predicted.stderr
    assert "recorded 2 prediction(s)" in predicted.stderr
    for row_id in rows:
        result = load_file(next(tmp_path.glob(f"*/*/{row_id}.toml")))
        prediction = result.prediction
        assert prediction is not None
        tensor, net = prediction.tensor_peak_bytes, result.summary.net_peak_bytes
        assert 0.97 * tensor <= net <= 1.15 * tensor + 160 * MIB, (row_id, tensor / MIB, net / MIB)
        # P × bytes by hand, from the parameter count the worker measured: fp32 weights, and for training
        # gradients and two AdamW moments of the same size. A prediction that lost any of them fails here.
        weights = 4 * result.model.parameters
        training = row_id.startswith("train")
        assert (prediction.weights_bytes, prediction.gradients_bytes, prediction.optimizer_bytes) == (
            weights, weights if training else 0, 2 * weights if training else 0)
        assert tensor == prediction.weights_bytes + prediction.gradients_bytes + prediction.optimizer_bytes + (
            prediction.activations_bytes) and prediction.activations_bytes > 0
        assert net >= (4 if training else 1) * weights  # the process held at least those arrays
    document = json.loads(predicted.stdout)
    assert [row["row"] for row in document] == rows
    assert {"row", "peak_bytes", "tensor_peak_bytes", "phase"} <= set(document[0])


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_a_config_transformers_cannot_build_is_one_line(tmp_path: Path) -> None:
    config = tmp_path / "broken.json"
    config.write_text(TINY_MODEL.read_text().replace('"num_hidden_layers": 2', '"num_hidden_layers": "two"'))
    assert '"two"' in config.read_text()
    result = run_cli("predict", "--model", str(config), "--rows", "train-b1")
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "transformers cannot build" in lines[0], result.stderr
    with pytest.raises(ModelError):
        simulate(parse_row("train-b1"), resolve_model(str(config)))


@pytest.mark.parametrize("model", ["SmolLM2-135M-Instruct", "gpt2", "Llama-3.2-1B", "Llama-2-7b"])
@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_every_shipped_config_predicts(model: str) -> None:
    result = run_cli("predict", "--model", model, "--rows", "train-b1-s64", "infer-b1-s64", "--format", "json")
    assert result.returncode == 0, result.stderr
    train, infer = json.loads(result.stdout)
    assert train["tensor_peak_bytes"] > infer["tensor_peak_bytes"] > infer["weights_bytes"] > 0


def _real_tensor_peaks(row_id: str, model_path: Path = TINY_MODEL) -> tuple[int, dict[str, int]]:
    """The same steps on real tensors, followed by the simulation's own storage tracker: what the real run's
    operators allocated, without the process and allocator around them (bitsandbytes' CPU optimizer updates
    called as their kernels, as the simulation calls them, so that their temporaries are operators too)."""
    import torch
    from transformers import AutoModelForCausalLM

    from generator.model_source import dtype_argument, load_config
    from generator.predict.exact.run import StorageTracker, _watch
    from generator.quantize import bitsandbytes_cpu_updates
    from generator.steps import prepare, run_steps

    row, source = parse_row(row_id), resolve_model(str(model_path))
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(load_config(source), **{dtype_argument(): getattr(torch, row.dtype)})
    model.tie_weights()
    prepared = prepare(model, row, lora_targets=source.lora_targets)
    tracker = StorageTracker()
    with bitsandbytes_cpu_updates(row), tracker.mode():
        _watch(tracker, prepared)
        run_steps(row, prepared, tracker.enter)
    tracker.finish()
    return tracker.peak, tracker.phase_peaks


@pytest.mark.parametrize("row_id", ["train-b2-s64", "infer-b4-s64", "gen-b1-s32-n4", "train-b2-s64-lora8",
                                    "train-b2-s64-bf16-nf4-lora8", "train-b2-s64-nf4-lora8", "train-b2-s64-adam8",
                                    "train-b2-s64-bf16-adam8"])
def test_the_simulation_takes_the_real_runs_path(row_id: str) -> None:
    """The tiny llama has grouped-query attention (4 heads, 2 for keys and values), as SmolLM2 does. Under fake
    tensors transformers once built the full causal mask and repeated keys and values per head, which the real
    run never does: the simulation overcounted by the repeated copies. Fake and real tensors, tracked alike, must
    agree to the byte, phase by phase."""
    simulated = simulate(parse_row(row_id), resolve_model(str(TINY_MODEL)))
    peak, phases = _real_tensor_peaks(row_id)
    assert simulated.tensor_peak_bytes == peak and dict(simulated.phase_peak_bytes) == phases, (row_id, phases)


def test_gpt2s_conv1d_layers_take_a_4bit_base_as_the_real_run_does() -> None:
    """GPT-2 keeps its linear layers as Conv1D (weights stored in × out); the 4-bit base quantizes them too, so
    its QLoRA row is not plain LoRA under another name, and fake and real tensors agree to the byte."""
    gpt2 = TESTS / "architectures" / "gpt2.json"
    simulated = simulate(parse_row("train-b2-s32-bf16-nf4-lora8"), resolve_model(str(gpt2)))
    plain = simulate(parse_row("train-b2-s32-bf16-lora8"), resolve_model(str(gpt2)))
    assert simulated.quantization_bytes > 0 and simulated.weights_bytes < plain.weights_bytes
    peak, phases = _real_tensor_peaks("train-b2-s32-bf16-nf4-lora8", gpt2)
    assert simulated.tensor_peak_bytes == peak and dict(simulated.phase_peak_bytes) == phases


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_a_generation_peak_by_hand_keeps_one_position_of_prompt_logits(dtype: str) -> None:
    """generate() passes logits_to_keep=1, so the prompt's pass keeps one position's logits, and each step
    copies that position to fp32. The decode phase, counted by hand from the tiny config: the weights and the
    tokens, the KV cache at its full length, the fp32 copy of one position's logits, and one decode step's
    temporaries (at most the growing layer's keys and values twice over while torch.cat copies them, the
    MLP's few vectors, and the forward's own one-position logits). Keeping every prompt position's logits, as
    the prompt's pass once did, adds batch × length × vocabulary × 4 bytes and fails this."""
    batch, length, new, dtype_bytes = 2, 64, 4, {"fp32": 4, "bf16": 2}[dtype]
    hidden, intermediate, vocab, layers, kv_heads, head_dim = 64, 128, 1024, 2, 2, 64 // 4
    row = parse_row(f"gen-b{batch}-s{length}-n{new}" + ("-bf16" if dtype == "bf16" else ""))
    simulated = simulate(row, resolve_model(str(TINY_MODEL)))
    per_layer = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + 3 * hidden * intermediate + 2 * hidden
    weights = (vocab * hidden + layers * per_layer + hidden) * dtype_bytes  # tied head, two norms a layer
    assert simulated.weights_bytes == weights
    tokens = batch * length * 8
    cached = length + new - 1  # the last new token needs no forward pass, so it never enters the cache
    kv_cache = layers * 2 * batch * kv_heads * head_dim * cached * dtype_bytes
    last_logits = batch * vocab * 4
    floor = weights + tokens + kv_cache + last_logits
    one_layer_kv = 2 * batch * kv_heads * head_dim * cached * dtype_bytes
    temporaries = 2 * one_layer_kv + 4 * batch * intermediate * 4 + batch * vocab * dtype_bytes
    decode = simulated.phase_peak_bytes["decode"]
    assert floor <= decode <= floor + temporaries, (decode - floor, temporaries)
    assert batch * length * vocab * 4 > temporaries  # so the whole prompt's logits could not hide in the margin


def test_the_prompt_pass_asks_for_what_generate_asks_for_in_each_release() -> None:
    """generate() passes logits_to_keep=1 from transformers 4.50 on, num_logits_to_keep=1 in 4.45 to 4.49, and
    nothing before (every position's logits were computed); a peft model is asked through its base model."""
    from generator.steps import last_logits_argument

    class Before:
        def forward(self, input_ids, past_key_values=None, use_cache=None): ...

    class Between:
        def forward(self, input_ids, past_key_values=None, num_logits_to_keep=0): ...

    class Now:
        def forward(self, input_ids, cache=None, logits_to_keep=0): ...

    class Adapted:
        def forward(self, *args, **kwargs): ...

        def get_base_model(self):
            return Now()

    assert [last_logits_argument(model()) for model in (Before, Between, Now, Adapted)] == [
        {}, {"num_logits_to_keep": 1}, {"logits_to_keep": 1}, {"logits_to_keep": 1}]


def _without_seconds(predictions: list) -> list:
    return [(item.row, item.peak_bytes, item.error, item.prediction and replace(item.prediction, seconds=0.0))
            for item in predictions]


def test_rows_side_by_side_give_the_figures_of_rows_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """predict's workers (rows.predict_rows): each program's part of each row, grouped by the row but its batch,
    in processes side by side; the same figures as every row in order, and a row whose part fails keeps the
    reason of its first failing part, the CPU's before the GPU's, while the other rows still answer."""
    import generator.predict.simulate as simulate_module
    from generator.budget import ProcessModel
    from generator.predict.rows import predict_rows

    real = simulate_module.simulate_part

    def failing(row, source, program, expandable=True):  # forked workers inherit the patch
        if row.id == "train-b4-s32-bf16" or (row.id == "infer-b2-s32" and program == "cuda"):
            raise RuntimeError(f"no {program} part for {row.id}")
        return real(row, source, program, expandable)

    monkeypatch.setattr(simulate_module, "simulate_part", failing)
    rows = tuple(parse_row(row) for row in ("train-b1-s32", "infer-b2-s32", "train-b4-s32-bf16", "train-b2-s32",
                                            "baseline", "train-b4-s32"))
    source, model = resolve_model(str(TINY_MODEL)), ProcessModel(0.0, 0.0, 0, "")
    in_order, side_by_side = (predict_rows(rows, source, model, workers) for workers in (1, 2))
    assert _without_seconds(side_by_side) == _without_seconds(in_order)
    errors = {item.row.id: item.error for item in side_by_side}
    assert errors == {"train-b1-s32": "", "infer-b2-s32": "RuntimeError: no cuda part for infer-b2-s32",
                      "train-b4-s32-bf16": "RuntimeError: no cpu part for train-b4-s32-bf16", "train-b2-s32": "",
                      "train-b4-s32": ""}
    assert all(item.prediction for item in side_by_side if not item.error)
