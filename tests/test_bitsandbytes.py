"""The 4-bit base and the 8-bit optimizer: bitsandbytes' operators on fake tensors return what they return on
real ones, to the byte, and the rows built on them count their weights and state from the real storages."""

import json
import subprocess
import sys

import pytest
from conftest import TINY_MODEL

from generator.matrix import RowError, parse_row
from generator.model_source import resolve_model
from generator.predict.simulate import simulate
from generator.quantize import import_bitsandbytes

torch = pytest.importorskip("torch")
pytest.importorskip("bitsandbytes")  # installed with the measure extra; a checkout without it skips, not errors
bnb = import_bitsandbytes()
ops = torch.ops.bitsandbytes


def _layout(value: object) -> list[tuple]:
    """What the simulation reads of an operator's outputs: each tensor's shape, dtype, strides and storage."""
    values = value if isinstance(value, (tuple, list)) else [value]
    return [(tuple(v.shape), v.dtype, v.stride(), v.untyped_storage().nbytes()) if isinstance(v, torch.Tensor)
            else v for v in values]


def _real_and_fake(op: object, *args: object) -> tuple[list[tuple], list[tuple]]:
    from torch._subclasses.fake_tensor import FakeTensorMode

    real = _layout(op(*args))  # type: ignore[operator]
    with FakeTensorMode(allow_non_fake_inputs=True) as fake:
        fakes = [fake.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args]
        return real, _layout(op(*fakes))  # type: ignore[operator]


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
@pytest.mark.parametrize("shape", [(64, 64), (96, 40), (7, 13)])  # whole blocks, a ragged last block, tiny
@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_the_4bit_operators_fake_kernels_match_the_real_ones(dtype: object, shape: tuple[int, int]) -> None:
    weight = torch.randn(shape, dtype=dtype)  # type: ignore[call-overload]
    real, fake = _real_and_fake(ops.quantize_4bit.default, weight, 64, "nf4", torch.uint8)
    assert real == fake
    packed, absmax = ops.quantize_4bit.default(weight, 64, "nf4", torch.uint8)
    real, fake = _real_and_fake(ops.dequantize_4bit.default, packed, absmax, 64, "nf4", list(shape), dtype)
    assert real == fake and fake[0][0] == shape


def test_the_blockwise_operators_fake_kernels_match_the_real_ones() -> None:
    scales = torch.rand(1000)  # the 4-bit scales that double quantization quantizes again, in blocks of 256
    code = bnb.functional.create_dynamic_map()
    real, fake = _real_and_fake(ops.quantize_blockwise.default, scales, code, 256)
    assert real == fake
    quantized, absmax = ops.quantize_blockwise.default(scales, code, 256)
    real, fake = _real_and_fake(ops.dequantize_blockwise.default, quantized, absmax, code, 256, torch.float32)
    assert real == fake


def test_the_8bit_update_allocates_nothing_on_real_or_fake_tensors() -> None:
    """AdamW8bit's update writes its two moments and scales in place: neither side returns a tensor, and every
    storage it is given keeps its size."""
    n = 4096
    args = ["adam", torch.randn(n), torch.randn(n), torch.zeros(n, dtype=torch.uint8),
            torch.zeros(n, dtype=torch.uint8), 0.9, 0.999, 0.0, 0.0, 1e-8, 1, 1e-4,
            bnb.functional.create_dynamic_map(signed=True), bnb.functional.create_dynamic_map(signed=False),
            torch.zeros(n // 256), torch.zeros(n // 256), 0.01, 1.0, False]
    before = [_layout(a) for a in args if isinstance(a, torch.Tensor)]
    real, fake = _real_and_fake(ops.optimizer_update_8bit_blockwise.default, *args)
    assert real == fake == [None]
    assert [_layout(a) for a in args if isinstance(a, torch.Tensor)] == before


def _ceil(n: int, block: int) -> int:
    return -(-n // block)


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_a_4bit_base_counts_its_packed_weights_and_their_scales() -> None:
    """SmolLM2's 210 linear layers (30 decoder layers × 7) hold two weights a byte; their scales are one byte a
    block of 64 (double quantization), with an fp32 scale per 256 of those, a 16-value NF4 map each, and the
    8-bit map and offset. The output head is tied to the embeddings, which stay in bf16."""
    prediction = simulate(parse_row("train-b1-s32-bf16-nf4-lora8"), resolve_model(None))
    sizes = [576 * 576, 192 * 576, 192 * 576, 576 * 576, 1536 * 576, 1536 * 576, 576 * 1536]
    blocks = [_ceil(n, 64) for n in sizes]  # one uint8 scale each
    quantization = 30 * (sum(blocks) + 4 * sum(_ceil(b, 256) for b in blocks)) + 210 * (16 * 4 + 256 * 4 + 4)
    elements = 30 * sum(sizes)
    embeddings, norms, adapters = 49_152 * 576 * 2, (30 * 2 + 1) * 576 * 2, 460_800 * 4
    assert prediction.weights_bytes == elements // 2 + quantization + embeddings + norms + adapters
    assert prediction.quantization_bytes == quantization
    assert prediction.parameters == 134_515_008 + 460_800  # counted as the model defines them, not packed


def _fresh(code: str) -> list[str]:
    """What a fresh interpreter prints."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()


@pytest.mark.slow  # simulates at scale or starts real processes
def test_the_simulator_imports_bitsandbytes_without_torch_compiles_inductor() -> None:
    """Imported plainly, bitsandbytes wraps CPU kernels in torch.compile, which imports torch's inductor (most of
    the import's second); the simulator imports it with dynamo off for the import, and restores the setting, so a
    QLoRA row simulated in a fresh process leaves inductor unimported and TORCHDYNAMO_DISABLE as it found it."""
    inductor = "'torch._inductor.compile_fx' in sys.modules"
    assert _fresh(f"import sys, bitsandbytes; print({inductor})") == ["True"]
    simulated = _fresh("import os, sys\n"
                       "from generator.matrix import parse_row\n"
                       "from generator.model_source import resolve_model\n"
                       "from generator.predict.simulate import simulate\n"
                       f"simulate(parse_row('train-b1-s8-bf16-nf4-lora8'), resolve_model({str(TINY_MODEL)!r}))\n"
                       f"print('bitsandbytes' in sys.modules, {inductor}, 'TORCHDYNAMO_DISABLE' in os.environ)")
    assert simulated == ["True", "False", "False"]


def test_8bit_adamw_keeps_one_byte_a_moment_where_bitsandbytes_quantizes() -> None:
    """Tensors of 4,096 elements or more keep uint8 moments and an fp32 scale per block of 256; smaller ones
    (the tiny model's norms) keep fp32 moments; both moments share one signed and one unsigned map."""
    prediction = simulate(parse_row("train-b1-s32-adam8"), resolve_model(str(TINY_MODEL)))
    config = json.loads(TINY_MODEL.read_text(encoding="utf-8"))
    hidden, inner, kv = config["hidden_size"], config["intermediate_size"], 32
    big = [1024 * hidden] + config["num_hidden_layers"] * [hidden * hidden, kv * hidden, kv * hidden,
                                                            hidden * hidden, inner * hidden, inner * hidden,
                                                            hidden * inner]
    small = (2 * config["num_hidden_layers"] + 1) * [hidden]
    quantized = [n for n in big if n >= 4096]
    fp32 = [n for n in big if n < 4096] + small
    expected = sum(2 * n + 2 * 4 * _ceil(n, 256) for n in quantized) + sum(2 * 4 * n for n in fp32) + 2 * 256 * 4
    assert prediction.optimizer_bytes == expected


@pytest.mark.parametrize("text, reason", [
    ("train-b8-nf4", "trains through LoRA"),
    ("infer-b8-adam8", "only apply to training rows"),
    ("train-b8-nf4-lora8-amp", "takes no amp"),
    ("train-b8-adam8-adam8", "optimizer twice"),
])
def test_impossible_bitsandbytes_rows_are_refused_in_one_line(text: str, reason: str) -> None:
    with pytest.raises(RowError, match=reason):
        parse_row(text)


def test_bitsandbytes_row_ids_round_trip() -> None:
    for text in ("train-b8-s256-bf16-nf4-lora8", "train-b8-s256-adam8", "train-b8-s256-bf16-adam8-glibc-tuned",
                 "train-b8-s256-nf4-lora16-adam8"):
        assert parse_row(text).id == text
