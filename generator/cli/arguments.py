"""What --model and --rows name, checked once for every command that takes them: the rows (each under the memory
cap where one was given) and the model, its lengths within its positions and its --lora-targets."""

import argparse

from generator.cli.errors import UsageError
from generator.matrix import DEFAULT_ROWS, Mode, RowError, RowSpec, select_rows


def parse_rows(names: list[str] | None, seq_len: int, memory_limit: int | None) -> tuple[RowSpec, ...]:
    """The rows a user asked for, each under the memory cap if one was given."""
    split = [part for name in (names or DEFAULT_ROWS) for part in name.split(",") if part.strip()]
    if not split:
        raise RowError("--rows names no row")
    rows = select_rows(split, seq_len)
    if memory_limit:
        rows = [row.with_limit(memory_limit) for row in rows]  # parse_row has checked everything else
    return tuple(rows)


def resolved_model(args: argparse.Namespace, rows: tuple[RowSpec, ...]):  # -> ModelSource, imported lazily
    """--model resolved and checked, with every row's length within its positions, and --lora-targets."""
    from dataclasses import replace

    from generator.model_source import check_lengths, check_lora_targets, resolve_model
    from generator.predict.fast.kept import kept_check

    source = resolve_model(args.model, kept_check)  # a config checked once is not built again (kept.py)
    check_lengths(source, [row.positions for row in rows if row.mode != Mode.BASELINE])
    if not args.lora_targets:
        return source
    if any(row.lora_all_linear for row in rows) or "alllin" in getattr(args, "with_tokens", ()):
        raise UsageError("--lora-targets with alllin: alllin names LoRA's targets (every linear layer but the "
                         "head); drop one of them")
    check_lora_targets(source, args.lora_targets)
    return replace(source, lora_targets=args.lora_targets)
