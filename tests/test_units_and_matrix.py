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
