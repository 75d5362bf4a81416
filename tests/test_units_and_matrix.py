"""Units and row ids."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from generator.matrix import DTYPES, RowError, RowSpec, default_matrix, parse_row
from generator.units import GIB, MIB, format_gib, format_mib, parse_size


def test_mib_is_two_to_the_twenty() -> None:
    assert format_mib(MIB) == "1 MiB"
    assert format_mib(1536 * MIB) == "1,536 MiB"
    assert format_gib(24 * GIB, 0) == "24 GiB"
    assert format_mib(10**6) == "1 MiB"  # a million bytes is 0.95 MiB, not "1 MB"
    assert format_mib(10**9) == "954 MiB"


@pytest.mark.parametrize(("text", "expected"), [
    ("3GiB", 3 * GIB), ("512MiB", 512 * MIB), ("3G", 3 * GIB), ("3GB", 3 * 10**9), ("1.5GiB", 3 * GIB // 2),
    ("4096", 4096)])
def test_parse_size(text: str, expected: int) -> None:
    assert parse_size(text) == expected


@pytest.mark.parametrize("text", ["", "GiB", "-3GiB", "0", "3 lightyears", "1e9"])
def test_parse_size_refuses(text: str) -> None:
    with pytest.raises(ValueError, match="size"):
        parse_size(text)


def test_default_ids_round_trip() -> None:
    for row in default_matrix():
        assert parse_row(row.id) == row


@given(mode=st.sampled_from(["inference", "train"]), batch=st.integers(1, 64), seq=st.integers(1, 4096),
       dtype=st.sampled_from(sorted(DTYPES.values())), ckpt=st.booleans(), lora=st.integers(0, 64),
       cap=st.integers(0, 64 * GIB))
def test_any_row_id_round_trips(mode: str, batch: int, seq: int, dtype: str, ckpt: bool, lora: int,
                                cap: int) -> None:
    train = mode == "train"
    row = RowSpec(mode, batch, seq, dtype, ckpt and train, lora if train else 0, cap)
    assert parse_row(row.id) == row


@pytest.mark.parametrize(("text", "message"), [
    ("foo", "unknown row"), ("train", "needs a batch size"), ("train-b0", "between 1 and"),
    ("train-b8-fp8", "unknown dtype 'fp8'"), ("infer-b8-lora", "only apply to training"),
    ("train-b8-s0", "between 1 and"), ("train-b100000", "between 1 and"), ("train-b8-xyz", "unknown part")])
def test_bad_row_ids_are_refused(text: str, message: str) -> None:
    with pytest.raises(RowError, match=message):
        parse_row(text)


def test_article_rows_and_other_batches_are_spelled_by_rowspec() -> None:
    from generator.matrix import Mode, parse_row
    from generator.report.views import article_row

    assert article_row(256) == "train-b8-s256"
    assert article_row(512, Mode.INFERENCE) == "infer-b8-s512"
    assert article_row(256, batch_size=1) == "train-b1-s256"
    assert article_row(256, dtype="bfloat16", lora_rank=8) == "train-b8-s256-bf16-lora8"
    assert article_row(256, gradient_checkpointing=True, allocator="glibc-tuned") == "train-b8-s256-ckpt-glibc-tuned"
    assert parse_row("gen-b4-s1024-n32-bf16").with_batch(5).id == "gen-b5-s1024-n32-bf16"
    assert parse_row("train-b16-s256-amp-zero3x8-cap512MiB").with_batch(17).id == "train-b17-s256-amp-zero3x8-cap512MiB"


@pytest.mark.parametrize("row_id", ["baseline", "baseline-cap512MiB-jemalloc", "infer-b8-s256", "gen-b1-s256-n64",
                                    "train-b8-s256-ckpt-bf16-nf4-lora16-adam8-zero3x8-cap3072MiB-glibc-tuned",
                                    "train-b8-s256-amp-zero1x2",
                                    "train-b4-s512-fp16-lora8-fsdpx16", "train-b2-s128-cap1048577B-tcmalloc"])
def test_every_coordinate_reads_what_it_writes(row_id: str) -> None:
    """One table (generator/coordinates.py) writes each part of an id and reads it back."""
    from generator.matrix import parse_row

    assert parse_row(row_id).id == row_id and parse_row(parse_row(row_id).id) == parse_row(row_id)


def test_a_row_label_and_the_time_factor_come_from_the_table() -> None:
    from generator.coordinates import labels, time_factor
    from generator.matrix import parse_row
    from generator.report.views import row_label

    row = parse_row("train-b8-s256-ckpt-bf16-lora8-cap2048MiB-jemalloc")
    assert labels(row, "q_proj v_proj") == ["gradient checkpointing",
                                            "bfloat16 weights and AdamW state", "LoRA r=8 on q_proj, v_proj",
                                            "capped at 2,048 MiB", "under jemalloc"]
    assert row_label(parse_row("gen-b1-s256-n64")) == ("generation, batch 1 × 256 prompt + 64 new tokens with the "
                                                       "KV cache")
    assert labels(parse_row("train-b8-s256-amp")) == ["bf16 autocast over fp32 weights and AdamW"]
    assert time_factor(row) == pytest.approx(1.15 * 0.75) and time_factor(parse_row("train-b8-s256-bf16")) == 1.0


def test_a_coordinate_named_twice_is_refused_by_its_name() -> None:
    from generator.matrix import RowError, parse_row

    for row_id, name in (("train-b1-zero3x8-zero2x4", "sharding"), ("train-b1-lora8-lora", "LoRA rank"),
                         ("train-b1-s2-s4", "sequence length"), ("train-b1-adam8-adamw", "optimizer")):
        with pytest.raises(RowError, match=f"names its {name} twice"):
            parse_row(row_id)
