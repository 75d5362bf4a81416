"""The shipped SmolLM2-135M-Instruct config and model resolution. The 135M model is only built on the meta
device here (shapes, no memory); the full matrix is a job, not a test."""

import json
from pathlib import Path

import peft
import pytest
import torch
from conftest import TINY_MODEL
from transformers import AutoConfig, AutoModelForCausalLM

from generator.matrix import DEFAULT_LORA_RANK
from generator.model_build import build_model
from generator.model_source import ModelError, resolve_model
from generator.steps import default_lora_targets

SMOLLM2_PARAMETERS = 134_515_008
SMOLLM2_LORA_TRAINABLE = 460_800


def _meta_model():
    source = resolve_model(None)
    config_dict = json.loads(Path(source.location).read_text())
    config = AutoConfig.for_model(config_dict.pop("model_type"), **config_dict)
    with torch.device("meta"):
        return AutoModelForCausalLM.from_config(config)


def test_shipped_config_is_smollm2_135m() -> None:
    model = _meta_model()
    assert sum(p.numel() for p in model.parameters()) == SMOLLM2_PARAMETERS
    assert model.lm_head.weight is model.model.embed_tokens.weight


def test_lora_on_q_and_v_trains_460800_parameters() -> None:
    config = peft.LoraConfig(r=DEFAULT_LORA_RANK, lora_alpha=16, target_modules=list(default_lora_targets("llama")),
                             task_type="CAUSAL_LM")
    model = peft.get_peft_model(_meta_model(), config)
    assert sum(p.numel() for p in model.parameters() if p.requires_grad) == SMOLLM2_LORA_TRAINABLE


def test_random_init_keeps_tied_weights_and_finite_values() -> None:
    model = build_model(resolve_model(str(TINY_MODEL)), torch.float32)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    assert all(torch.isfinite(p).all() for p in model.parameters())
    batch = torch.randint(0, model.config.vocab_size, (2, 8))
    assert torch.isfinite(model(input_ids=batch, labels=batch).loss)


def test_resolve_reports_the_source() -> None:
    default = resolve_model(None)
    assert default.name == "SmolLM2-135M-Instruct" and default.kind == "random-init"
    assert "shipped" in default.reference


def test_resolve_refuses_what_it_cannot_measure(tmp_path) -> None:
    with pytest.raises(ModelError, match="no such file"):
        resolve_model(str(tmp_path / "missing.json"))
    vision = tmp_path / "vit.json"
    vision.write_text(json.dumps({"model_type": "vit"}))
    with pytest.raises(ModelError, match="not a causal language model"):
        resolve_model(str(vision))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    with pytest.raises(ModelError, match="not a readable JSON config"):
        resolve_model(str(broken))


def test_a_local_folder_with_weights_loads_pretrained(tmp_path) -> None:
    saved = build_model(resolve_model(str(TINY_MODEL)), torch.float32)
    saved.save_pretrained(tmp_path / "tiny")
    source = resolve_model(str(tmp_path / "tiny"))
    assert source.kind == "pretrained" and source.name == "tiny"
    loaded = build_model(source, torch.float32)
    for (name, expected), (_, actual) in zip(saved.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert torch.equal(expected, actual), name


def test_a_folder_with_only_a_config_builds_random_weights(tmp_path) -> None:
    (tmp_path / "config.json").write_text(TINY_MODEL.read_text())
    assert resolve_model(str(tmp_path)).kind == "random-init"
