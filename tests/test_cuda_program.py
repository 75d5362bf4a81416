"""The GPU's program in the simulation (generator/predict/exact/cuda_program.py): CUDA's SDPA backend, CUDA
autocast's lists and bitsandbytes' fused update, each checked against what PyTorch's and bitsandbytes' sources
say, with expectations worked out by hand."""

import pytest
import torch
from conftest import TINY_MODEL

from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict.exact import cuda_program
from generator.predict.exact.cuda_program import CPU, CUDA, CUDA_SDPA_ONLY, cuda_autocast, sdpa_backend
from generator.predict.fast.small_depths import fast_run as _run


def _qkv(dtype: torch.dtype, heads: int = 4, kv_heads: int = 4, head: int = 16) -> tuple:
    return (torch.empty(1, heads, 8, head, dtype=dtype), torch.empty(1, kv_heads, 8, head, dtype=dtype),
            torch.empty(1, kv_heads, 8, head, dtype=dtype))


@pytest.mark.parametrize(("dtype", "heads", "mask", "gqa", "head", "expected"), [
    (torch.bfloat16, 2, False, True, 16, "flash"),  # no mask, half precision: flash, GQA native
    (torch.float16, 4, False, False, 256, "flash"),
    (torch.bfloat16, 4, False, False, 264, "efficient"),  # over 256: flash declines, 264 is a multiple of 8
    (torch.bfloat16, 4, True, False, 16, "efficient"),  # flash takes no mask
    (torch.float32, 4, False, False, 16, "efficient"),  # flash takes no fp32
    (torch.float32, 2, False, True, 16, "math"),  # efficient takes no grouped heads in torch 2.13
    (torch.float32, 4, False, False, 6, "math"),  # 6 is not a multiple of fp32's alignment, 4
    (torch.bfloat16, 2, True, False, 16, "math"),  # a mask and grouped heads: neither fused kernel
])
def test_sdpa_picks_the_backend_cudas_rules_pick(dtype, heads, mask, gqa, head, expected) -> None:
    query, key, value = _qkv(dtype, 4, heads, head)
    attn_mask = torch.ones(1, 1, 8, 8, dtype=torch.bool) if mask else None
    assert sdpa_backend(query, key, value, attn_mask, gqa) == expected


def test_the_math_fallback_keeps_the_attention_matrix_for_backward() -> None:
    """The tiny Llama has 2 layers, 4 heads sharing 2 key-value heads, and trains in fp32: on a GPU its
    attention falls back to the math kernel, which keeps each layer's batch × heads × length² fp32
    probabilities for backward. The CPU's flash kernel keeps one log-sum-exp per position instead."""
    row, source = parse_row("train-b2-s64"), resolve_model(str(TINY_MODEL))
    cuda_program.BACKENDS_CHOSEN.clear()
    on_gpu = _run(row, source, CUDA)[0]
    assert set(cuda_program.BACKENDS_CHOSEN) == {"math"}
    on_cpu = _run(row, source, CPU)[0]
    probabilities = 2 * 2 * 4 * 64 * 64 * 4  # layers × batch × heads × length × length × 4 bytes
    extra = on_gpu.phase_peaks["backward"] - on_cpu.phase_peaks["backward"]
    assert probabilities <= extra <= 2 * probabilities, extra


def test_half_precision_attention_saves_the_same_on_both_programs() -> None:
    """bf16 without a mask: flash attention on either device, which keeps the output and one fp32 log-sum-exp
    per position and head; CUDA's also keeps its random-number state (two uint64 tensors: 24 bytes a call)."""
    row, source = parse_row("train-b2-s64-bf16"), resolve_model(str(TINY_MODEL))
    cuda_program.BACKENDS_CHOSEN.clear()
    on_gpu = _run(row, source, CUDA)[0]
    assert set(cuda_program.BACKENDS_CHOSEN) == {"flash"}
    on_cpu = _run(row, source, CPU)[0]
    assert 0 <= on_gpu.phase_peaks["backward"] - on_cpu.phase_peaks["backward"] <= 2 * 24 * 8


def test_cuda_autocast_casts_by_cudas_lists_and_casts_a_weight_once() -> None:
    weight = torch.nn.Parameter(torch.ones(8, 8))
    x = torch.ones(4, 8)
    casts = []
    original = torch.Tensor.to

    def counting(self, *args, **kwargs):
        if self is weight:
            casts.append(args)
        return original(self, *args, **kwargs)

    with cuda_autocast(True):
        torch.Tensor.to = counting  # type: ignore[method-assign]
        try:
            first, second = torch.nn.functional.linear(x, weight), torch.nn.functional.linear(x, weight)
        finally:
            torch.Tensor.to = original  # type: ignore[method-assign]
        cubed = torch.pow(first, 3.0)  # CUDA's fp32 list; the CPU's lists leave pow alone
        soft = torch.softmax(first, -1)  # an fp32 result on CUDA
        with torch.autocast("cpu", enabled=False):  # a region the model turns off stays off
            plain = torch.nn.functional.linear(x, weight)
    assert (first.dtype, second.dtype, cubed.dtype, soft.dtype, plain.dtype) == (
        torch.bfloat16, torch.bfloat16, torch.float32, torch.float32, torch.float32)
    assert len(casts) == 1


def test_the_8bit_update_is_fused_on_a_gpu() -> None:
    """bitsandbytes' CPU update dequantizes each parameter's moments to fp32 beside an fp32 gradient; CUDA's
    kernel updates in place. The optimizer phase of the GPU's program holds less than with the CPU's update."""
    row, source = parse_row("train-b2-s64-adam8"), resolve_model(str(TINY_MODEL))
    fused = _run(row, source, CUDA)[0].phase_peaks["optimizer"]
    cpu_update = _run(row, source, CUDA_SDPA_ONLY)[0].phase_peaks["optimizer"]
    assert fused < cpu_update


def test_a_predictions_gpu_figures_replay_the_gpu_programs_allocations() -> None:
    """The reserve a prediction records is the caching allocator replayed over the GPU program's storages, not
    the CPU program's (which gave every GPU answer before)."""
    from generator.answers.cuda_allocator import replay
    from generator.predict.simulate import simulate

    row, source = parse_row("train-b2-s64"), resolve_model(str(TINY_MODEL))
    prediction, on_gpu, on_cpu = simulate(row, source), _run(row, source, CUDA)[0], _run(row, source, CPU)[0]
    assert prediction.tensor_peak_bytes == on_cpu.peak < on_gpu.peak == prediction.cuda_tensor_peak_bytes
    assert prediction.cuda_reserved_bytes == replay(on_gpu.events).peak_reserved >= on_gpu.peak


def test_mixed_precision_attention_runs_in_bf16_as_autocast_casts_it() -> None:
    """Under autocast SDPA is on both devices' bf16 list: the rotary embedding leaves fp32 queries and keys in a
    mixed-precision row, and autocast casts them back before the kernel is chosen, so a GPU runs flash attention
    (a grouped-query fp32 call would fall back to the math kernel)."""
    row, source = parse_row("train-b2-s64-amp"), resolve_model(str(TINY_MODEL))
    cuda_program.BACKENDS_CHOSEN.clear()
    _run(row, source, CUDA)
    assert set(cuda_program.BACKENDS_CHOSEN) == {"flash"}


def test_adamw_updates_every_parameter_at_once_on_a_gpu() -> None:
    """torch's AdamW runs its foreach update on CUDA (its default where every parameter is there) and a loop on
    the CPU: on a GPU the update holds a temporary of every parameter together, counted as optimizer state, so a
    card of a ZeRO-1 row holds its share of them as it does of the moments."""
    from generator.predict.exact.sharding import per_card

    row, source = parse_row("train-b2-s64"), resolve_model(str(TINY_MODEL))
    foreach, prepared, _ = _run(row, source, CUDA)
    loop = _run(row, source, CUDA_SDPA_ONLY)[0]
    sizes = [p.untyped_storage().nbytes() for p in prepared.model.parameters() if p.requires_grad]
    trainable, largest = sum(sizes), max(sizes)
    assert foreach.phase_peaks["optimizer"] - loop.phase_peaks["optimizer"] >= trainable - 2 * largest > 0
    shared = {name: per_card(foreach, parse_row(f"train-b2-s64-{name}x4")).phase_peaks["optimizer"]
              for name in ("ddp", "zero1")}
    assert shared["ddp"] - shared["zero1"] >= 3 * trainable * 3 // 4 - len(foreach.journal)  # moments, temporaries
