"""A row's coordinates after its mode, each declared once, in the order a row id spells them: its name in
messages, the part of a row id it writes and reads, its phrase in a row's label, and how it scales a step's
time. RowSpec.id, parse_row (generator/matrix.py), the article's row labels (generator/report/views.py) and
the time estimate (generator/measure/estimate.py) all read this one table, so a new coordinate is a RowSpec
field, one entry here, and its behaviour in generator/steps.py (the result files follow: ``later``).

The allocator goes last in an id and is read from its end (its names hold '-'), so it is declared with the
other coordinates but parsed apart."""

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from generator.units import MIB, format_mib, parse_size

DTYPES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
DTYPE_TOKENS = {name: token for token, name in DTYPES.items()}
QUANTIZATIONS = {"nf4": "nf4"}  # id token -> the base's weight format (generator/quantize.py); "" keeps the dtype
# id token -> the bitsandbytes program a 4-bit row runs; "" is the installed release's. "0.42": bitsandbytes before
# 0.43.2, whose 4-bit matmul kept each 4-bit layer's input for backward although backward never reads it
# (bitsandbytes#1270, "fix QLoRA mem bug: delete useless buffered activation"); the release LitGPT's published
# QLoRA figures ran (generator/quantize.py, matmul_4bit_program).
BITSANDBYTES_PROGRAMS = {"bnb042": "0.42"}
BITSANDBYTES_TOKENS = {name: token for token, name in BITSANDBYTES_PROGRAMS.items()}
# id token -> optimizer; torch's AdamW is the default. padam8: bitsandbytes' PagedAdamW8bit, whose moments of a
# parameter of 100,000 elements or more live in CUDA's unified memory, outside the caching allocator (on a CPU
# bitsandbytes falls back to AdamW8bit's buffers: the same bytes)
OPTIMIZERS = {"adamw": "adamw", "adam8": "adamw8bit", "padam8": "paged_adamw8bit"}
OPTIMIZER_TOKENS = {name: token for token, name in OPTIMIZERS.items()}
DEFAULT_OPTIMIZER = "adamw"
# How N data-parallel cards share a training row's state (simulated only; one machine cannot measure N cards).
# Each shards what it names, 1/N a card: DDP nothing, ZeRO-1 the optimizer state, ZeRO-2 also the gradients,
# ZeRO-3 and FSDP (full sharding) also the weights, which they gather a unit at a time.
SHARDED_KINDS = {"ddp": (), "zero1": ("optimizer",), "zero2": ("optimizer", "gradients"),
                 "zero3": ("optimizer", "gradients", "weights"), "fsdp": ("optimizer", "gradients", "weights")}
_SHARDING_TOKEN = re.compile(r"^(" + "|".join(SHARDED_KINDS) + r")x(\d+)$")
# id token -> the training loss's program (generator/savers.py); "" is transformers' own: the whole logits, upcast
# to fp32. cce: torchtune's CEWithChunkedOutputLoss (the head run on 8 chunks of the sequence, each upcast alone);
# flce: Liger's fused linear cross-entropy (the head and the loss's gradient a block of tokens at a time, no
# logits kept)
LOSSES = {"cce": "chunked", "flce": "fused"}
LOSS_TOKENS = {name: token for token, name in LOSSES.items()}
LOSS_LABELS = {"chunked": "chunked cross-entropy (torchtune)", "fused": "fused linear cross-entropy (Liger)"}
DEFAULT_LORA_RANK = 8
DEFAULT_ALLOCATOR = "glibc"


class PartError(ValueError):
    """A part of a row id that names its coordinate but not a value it can take (the reason, in words)."""


@dataclass(frozen=True)
class Coordinate:
    """One coordinate of a row."""

    field: str  # the RowSpec field it sets (a sharded row's part also sets gpus)
    name: str  # how a message names it: "checkpointing"
    grammar: tuple[str, ...]  # its id parts, as an error message lists them: ("ckpt",)
    token: Callable[[Any], str]  # its part of a row's id, "" where the row has the default
    parse: Callable[[str], dict[str, object] | None]  # an id part -> the fields it sets; None: not its part
    label: Callable[[Any, str], str] = lambda row, lora_targets: ""  # its phrase in a row's label, "" for none
    time_factor: float = 1.0  # a step's time, when it is set, against plain training
    values: tuple[str, ...] = ()  # the values a result file's row may hold, where the coordinate names them
    # Declared after result files were first written: (field, default) pairs a row file leaves out where they
    # hold their default, so a row without the coordinate writes the file it wrote before (store/codec.py).
    later: tuple[tuple[str, object], ...] = ()


def _flag(field: str, token: str, name: str, label: str, time_factor: float = 1.0,
          later: bool = False) -> Coordinate:
    return Coordinate(field, name, (token,), lambda row: token if getattr(row, field) else "",
                      lambda part: {field: True} if part == token else None,
                      lambda row, _: label if getattr(row, field) else "", time_factor,
                      later=((field, False),) if later else ())


def _number(field: str, prefix: str, name: str, grammar: str) -> Coordinate:
    def parse(part: str) -> dict[str, object] | None:
        rest = part[len(prefix):]
        return {field: int(rest)} if part.startswith(prefix) and rest.lstrip("-").isdigit() else None

    return Coordinate(field, name, (grammar,), lambda row: f"{prefix}{getattr(row, field)}" if getattr(row, field)
                      else "", parse)


def _named(field: str, names: dict[str, str], tokens: dict[str, str], default: str, name: str,
           later: bool = False, phrases: dict[str, str] | None = None) -> Coordinate:
    return Coordinate(field, name, tuple(names), lambda row: tokens[getattr(row, field)]
                      if getattr(row, field) != default else "",
                      lambda part: {field: names[part]} if part in names else None,
                      lambda row, _: (phrases or {}).get(getattr(row, field), ""),
                      values=tuple(dict.fromkeys((default, *names.values()))),
                      later=((field, default),) if later else ())


def _lora(part: str) -> dict[str, object] | None:
    if part == "lora":
        return {"lora_rank": DEFAULT_LORA_RANK}
    rest = part.removeprefix("lora")
    if rest == part or not rest.lstrip("-").isdigit():
        return None
    if int(rest) < 1:  # lora0 would run as full training under a LoRA id
        raise PartError("LoRA rank must be between 1 and 1024")
    return {"lora_rank": int(rest)}


def _lora_label(row: Any, lora_targets: str) -> str:
    if not row.lora_rank:
        return ""
    return f"LoRA r={row.lora_rank}" + (f" on {', '.join(lora_targets.split())}" if lora_targets else "")


def _sharding(part: str) -> dict[str, object] | None:
    found = _SHARDING_TOKEN.match(part)
    return {"sharding": found.group(1), "gpus": int(found.group(2))} if found else None


def sharding_token(sharding: str, gpus: int) -> str:
    """A sharded row's part: 'zero3x8'."""
    return f"{sharding}x{gpus}"


def cap_token(n_bytes: int) -> str:
    return f"cap{n_bytes // MIB}MiB" if n_bytes % MIB == 0 else f"cap{n_bytes}B"


def _cap(part: str) -> dict[str, object] | None:
    if not part.startswith("cap"):
        return None
    try:
        return {"memory_limit_bytes": parse_size(part[3:])}
    except ValueError as error:
        raise PartError(str(error)) from None


COORDINATES = (  # in the order a row id spells them, after its mode
    _number("batch_size", "b", "batch size", "b<batch>"),
    _number("seq_len", "s", "sequence length", "s<length>"),
    _number("new_tokens", "n", "new tokens", "n<new tokens>"),  # in the label's head, with the batch
    _flag("gradient_checkpointing", "ckpt", "checkpointing", "gradient checkpointing", time_factor=1.15),
    _flag("amp", "amp", "autocast", "bf16 autocast over fp32 weights and AdamW"),
    Coordinate("dtype", "dtype", tuple(DTYPES), lambda row: DTYPE_TOKENS[row.dtype] if row.dtype != "float32" else "",
               lambda part: {"dtype": DTYPES[part]} if part in DTYPES else None,
               lambda row, _: f"{row.dtype} weights and AdamW state" if row.dtype != "float32" else "",
               values=tuple(DTYPES.values())),
    _named("quantization", QUANTIZATIONS, {name: token for token, name in QUANTIZATIONS.items()}, "",
           "quantization", later=True),
    Coordinate("bitsandbytes", "bitsandbytes program", tuple(BITSANDBYTES_PROGRAMS),
               lambda row: BITSANDBYTES_TOKENS[row.bitsandbytes] if row.bitsandbytes else "",
               lambda part: {"bitsandbytes": BITSANDBYTES_PROGRAMS[part]} if part in BITSANDBYTES_PROGRAMS else None,
               lambda row, _: (f"bitsandbytes {row.bitsandbytes}'s 4-bit matmul, which keeps each layer's input"
                               if row.bitsandbytes else ""),
               values=("", *BITSANDBYTES_PROGRAMS.values()), later=(("bitsandbytes", ""),)),
    Coordinate("lora_rank", "LoRA rank", ("lora<r>",), lambda row: f"lora{row.lora_rank}" if row.lora_rank else "",
               _lora, _lora_label, time_factor=0.75),
    _flag("lora_all_linear", "alllin", "LoRA on all linear layers", "on all linear layers", later=True),
    _named("optimizer", OPTIMIZERS, OPTIMIZER_TOKENS, DEFAULT_OPTIMIZER, "optimizer", later=True,
           phrases={"paged_adamw8bit": "paged 8-bit AdamW (bitsandbytes)"}),
    _flag("optimizer_in_backward", "optbwd", "optimizer in backward", "the optimizer step in backward", later=True),
    Coordinate("loss", "loss", tuple(LOSSES), lambda row: LOSS_TOKENS[row.loss] if row.loss else "",
               lambda part: {"loss": LOSSES[part]} if part in LOSSES else None,
               lambda row, _: LOSS_LABELS[row.loss] if row.loss else "", values=("", *LOSSES.values()),
               later=(("loss", ""),)),
    _flag("offload", "offload", "activation offloading", "activations offloaded (torchtune)", time_factor=1.1,
          later=True),
    Coordinate("sharding", "sharding", (f"<sharding>x<gpus> ({', '.join(SHARDED_KINDS)})",),
               lambda row: sharding_token(row.sharding, row.gpus) if row.sharding else "", _sharding,
               later=(("sharding", ""), ("gpus", 1))),
    Coordinate("memory_limit_bytes", "memory cap", ("cap<size>",),
               lambda row: cap_token(row.memory_limit_bytes) if row.memory_limit_bytes else "", _cap,
               lambda row, _: f"capped at {format_mib(row.memory_limit_bytes)}" if row.memory_limit_bytes else ""),
    Coordinate("allocator", "allocator", (), lambda row: row.allocator if row.allocator != DEFAULT_ALLOCATOR else "",
               lambda part: None,  # read from the id's end by parse_row
               lambda row, _: f"under {row.allocator}" if row.allocator != DEFAULT_ALLOCATOR else ""),
)
NAMES = {"gpus": "sharding", **{coordinate.field: coordinate.name for coordinate in COORDINATES}}


# What result files written before a coordinate existed leave out, with its default
LATER_FIELDS = {field: default for coordinate in COORDINATES for field, default in coordinate.later}


def parse_part(part: str) -> dict[str, object] | None:
    """The fields one part of a row id sets, or None where no coordinate reads it; PartError for a bad value."""
    return next((found for coordinate in COORDINATES if (found := coordinate.parse(part)) is not None), None)


def id_parts(row: Any) -> list[str]:
    """A row's id parts after its mode, each coordinate that differs from its default."""
    return [token for coordinate in COORDINATES if (token := coordinate.token(row))]


def labels(row: Any, lora_targets: str = "") -> list[str]:
    """The phrases of a row's label after its head, in the id's order."""
    return [text for coordinate in COORDINATES if (text := coordinate.label(row, lora_targets))]


# The coordinates that are 2026's memory savers (generator/savers.py), and what each says where it is on
SAVER_FIELDS = ("lora_all_linear", "optimizer_in_backward", "loss", "offload")


def savers(row: Any) -> list[str]:
    """The memory savers a row turns on, in words: the saver coordinates set, and paged state."""
    found = [c.label(row, "") for c in COORDINATES if c.field in SAVER_FIELDS and getattr(row, c.field)]
    return (["paged 8-bit AdamW (bitsandbytes)"] if row.optimizer == "paged_adamw8bit" else []) + found


def time_factor(row: Any) -> float:
    """How a row's set coordinates scale its step's time."""
    factor = 1.0
    for coordinate in COORDINATES:
        if coordinate.time_factor != 1.0 and getattr(row, coordinate.field):
            factor *= coordinate.time_factor
    return factor
