"""The measurement matrix: a row's coordinates, its id (which is also its file name), and the default rows.

A row id spells its coordinates, so ids people type and file names on disk are the same thing:
``baseline``, ``infer-b8-s256``, ``train-b8-s256-ckpt``, ``train-b8-s256-bf16``, ``train-b8-s256-lora8``,
``train-b8-s256-cap3072MiB``, ``train-b8-s256-bf16-nf4-lora8`` (QLoRA: a 4-bit NF4 base under
LoRA), ``train-b8-s256-adam8`` (bitsandbytes' 8-bit AdamW), ``train-b8-s256-amp-zero3x8`` (one of 8 cards
under ZeRO-3; simulated only), ``train-b8-s256-glibc-tuned`` (the allocator goes last). When typing one,
``-s<len>`` may be left out (``--seq`` fills it in).
"""

import re
from dataclasses import dataclass, replace
from enum import StrEnum

from generator.coordinates import (  # noqa: F401 (the row vocabulary, read from here as before)
    COORDINATES,
    DEFAULT_ALLOCATOR,
    DEFAULT_LORA_RANK,
    DEFAULT_OPTIMIZER,
    DTYPE_TOKENS,
    DTYPES,
    NAMES,
    OPTIMIZER_TOKENS,
    OPTIMIZERS,
    QUANTIZATIONS,
    SHARDED_KINDS,
    PartError,
    id_parts,
    parse_part,
    sharding_token,
)


class Mode(StrEnum):
    """What a row runs. Logic compares these names; report makes the words a reader sees (views.MODE_LABELS)."""

    BASELINE = "baseline"
    INFERENCE = "inference"
    TRAIN = "train"
    GENERATE = "generate"


MODES = {"baseline": Mode.BASELINE, "infer": Mode.INFERENCE, "train": Mode.TRAIN, "gen": Mode.GENERATE}
MODE_TOKENS: dict[str, str] = {name: token for token, name in MODES.items()}
MAX_GPUS = 1024
DEFAULT_NEW_TOKENS = 64  # a generation row's new tokens when its id names none
MAX_NEW_TOKENS = 4096
DEFAULT_SEQ_LEN = 256
STEPS = 2  # AdamW allocates its state on the first update: one step under-reports.
# Seconds before a row's worker is stopped: the slowest default row (16-bit training on a CPU without native
# bf16) takes ~16 min.
DEFAULT_TIMEOUT_SECONDS = 3600.0
# The memory allocator a row's process runs under (generator/measure/allocator.py): glibc as a user's process
# gets it, glibc with fixed mmap and trim thresholds, or jemalloc or tcmalloc preloaded. It is a coordinate:
# the same row under two allocators is two rows.
ALLOCATORS = ("glibc", "glibc-tuned", "jemalloc", "tcmalloc")
TUNED_THRESHOLD_BYTES = 128 * 1024  # glibc-tuned: glibc's mmap and trim thresholds, fixed at 128 KiB
TUNED_SETTINGS = {"MALLOC_MMAP_THRESHOLD_": str(TUNED_THRESHOLD_BYTES),
                  "MALLOC_TRIM_THRESHOLD_": str(TUNED_THRESHOLD_BYTES)}
MAX_BATCH = 1024
MAX_SEQ_LEN = 32768
MAX_TOKENS_PER_STEP = 1 << 20
_DTYPE_LIKE = re.compile(r"^(fp|bf|float|int|uint|f|i)\d+$")


def batch_limit(seq_len: int) -> int:
    """The largest batch a row of this length may have: MAX_BATCH, or fewer where the tokens of a step would
    pass MAX_TOKENS_PER_STEP. fit, its curves, the fit page and its calculator all search up to it."""
    return min(MAX_BATCH, MAX_TOKENS_PER_STEP // seq_len)


class RowError(ValueError):
    """A row id or coordinate that cannot be measured."""


@dataclass(frozen=True, order=True)
class RowSpec:
    """The coordinates of one measurement."""

    mode: str  # a Mode (a result file's row may hold any text until the codec checks it)
    batch_size: int = 0
    seq_len: int = 0
    dtype: str = "float32"
    gradient_checkpointing: bool = False
    lora_rank: int = 0  # 0: every parameter trains
    memory_limit_bytes: int = 0  # 0: no cap
    steps: int = STEPS
    allocator: str = DEFAULT_ALLOCATOR
    amp: bool = False  # bf16 autocast over fp32 weights and AdamW: mixed-precision training
    new_tokens: int = 0  # generation rows: tokens decoded with the KV cache after the prompt
    quantization: str = ""  # "nf4": the base's linear layers in 4-bit NF4 (QLoRA); "": in the row's dtype
    bitsandbytes: str = ""  # a 4-bit row's bitsandbytes program: "" the installed one, "0.42" (BITSANDBYTES_PROGRAMS)
    optimizer: str = DEFAULT_OPTIMIZER  # "adamw" (torch's) | "adamw8bit" (bitsandbytes')
    sharding: str = ""  # a key of SHARDED_KINDS, or "": one card holds everything
    gpus: int = 1  # the cards that share the row's state; the batch is each card's own
    # The memory savers of 2026's recipes (generator/savers.py): LoRA on every linear layer, each parameter's
    # update as its gradient is made, the loss's program (coordinates.LOSSES), the saved activations moved off
    # the device
    lora_all_linear: bool = False
    optimizer_in_backward: bool = False
    loss: str = ""
    offload: bool = False

    @property
    def id(self) -> str:
        """The canonical id: every coordinate that differs from plain fp32, uncapped, full training."""
        return "-".join([MODE_TOKENS[self.mode], *id_parts(self)])  # the table in generator/coordinates.py

    @property
    def positions(self) -> int:
        """The longest sequence the model sees: the prompt and, for generation, every new token."""
        return self.seq_len + self.new_tokens

    @property
    def sharded_kinds(self) -> tuple[str, ...]:
        """The categories of state each card holds 1/gpus of."""
        return SHARDED_KINDS[self.sharding] if self.sharding else ()

    def with_sharding(self, sharding: str, gpus: int) -> "RowSpec":
        """The same row on gpus cards sharing its state."""
        return replace(self, sharding=sharding, gpus=gpus)

    @property
    def tokens_per_step(self) -> int:
        """Batch × sequence length: what drives activation memory."""
        return self.batch_size * self.seq_len

    def with_limit(self, memory_limit_bytes: int) -> "RowSpec":
        """The same row under a memory cap."""
        return replace(self, memory_limit_bytes=memory_limit_bytes)

    def with_allocator(self, allocator: str) -> "RowSpec":
        """The same row under another allocator."""
        return replace(self, allocator=allocator)

    def with_batch(self, batch_size: int) -> "RowSpec":
        """The same row at another batch."""
        return replace(self, batch_size=batch_size)


def parse_row(text: str, seq_len: int = DEFAULT_SEQ_LEN) -> RowSpec:
    """Turn a typed row id into coordinates; raise RowError with a one-line reason."""
    text_allocator = next((name for name in sorted(ALLOCATORS, key=len, reverse=True)
                           if text.strip().lower().endswith(f"-{name}")), "")
    core = text.strip().lower().removesuffix(f"-{text_allocator}") if text_allocator else text.strip().lower()
    tokens = core.split("-")
    mode = MODES.get(tokens[0])
    if mode is None:
        raise RowError(f"unknown row {text!r}: it must start with one of {', '.join(MODES)}")
    fields: dict[str, object] = {"mode": mode}
    if text_allocator:
        fields["allocator"] = text_allocator
    for token in tokens[1:]:
        parsed = _parse_token(token, text)
        twice = set(parsed) & set(fields)
        if twice:  # "train-b2-bf16-fp16" must not quietly mean fp16
            raise RowError(f"row {text!r} names its {NAMES[twice.pop()]} twice")
        fields.update(parsed)
    if mode == Mode.BASELINE:
        if set(fields) - {"mode", "memory_limit_bytes", "allocator"}:
            raise RowError(f"row {text!r}: the baseline takes no batch, length, dtype, LoRA or optimizer")
        return RowSpec(**fields)  # type: ignore[arg-type]
    if "batch_size" not in fields:
        raise RowError(f"row {text!r} needs a batch size, such as -b8")
    fields.setdefault("seq_len", seq_len)
    if mode == Mode.GENERATE:
        fields.setdefault("new_tokens", DEFAULT_NEW_TOKENS)
    row = RowSpec(**fields)  # type: ignore[arg-type]
    check_row(row, text)
    return row


def _parse_token(token: str, text: str) -> dict[str, object]:
    try:
        found = parse_part(token)  # the table in generator/coordinates.py
    except PartError as error:
        raise RowError(f"row {text!r}: {error}") from None
    if found is not None:
        return found
    if _DTYPE_LIKE.match(token):
        raise RowError(f"row {text!r}: unknown dtype {token!r} (known: {', '.join(DTYPES)})")
    if token in ("glibc", "tuned", "jemalloc", "tcmalloc"):
        raise RowError(f"row {text!r}: the allocator goes last ({', '.join(ALLOCATORS)})")
    parts = [grammar for coordinate in COORDINATES for grammar in coordinate.grammar]
    raise RowError(f"row {text!r}: unknown part {token!r} (expected {', '.join(parts)} or an allocator: "
                   f"{', '.join(ALLOCATORS[1:])})")


def check_row(row: RowSpec, text: str = "") -> None:
    """Refuse coordinates that are impossible or absurd for a single machine."""
    name = text or row.id
    if row.mode != Mode.TRAIN and (row.gradient_checkpointing or row.lora_rank or row.amp):
        raise RowError(f"row {name!r}: checkpointing, autocast and LoRA only apply to training rows")
    if row.mode != Mode.TRAIN and (row.quantization or row.optimizer != DEFAULT_OPTIMIZER):
        raise RowError(f"row {name!r}: a 4-bit base and the optimizer only apply to training rows")
    if row.sharding and (row.mode != Mode.TRAIN or not 2 <= row.gpus <= MAX_GPUS):
        raise RowError(f"row {name!r}: sharding applies to training rows, on 2 to {MAX_GPUS} cards")
    _check_savers(row, name)
    if row.quantization and not row.lora_rank:
        raise RowError(f"row {name!r}: a 4-bit base is frozen, so it trains through LoRA: add lora<r> (QLoRA)")
    if row.bitsandbytes and not row.quantization:
        raise RowError(f"row {name!r}: bnb042 names the 4-bit matmul of a bitsandbytes release: add nf4 (QLoRA)")
    if row.quantization and row.amp:
        raise RowError(f"row {name!r}: a 4-bit base computes in bf16 already; it takes no amp")
    if row.amp and row.dtype != "float32":
        raise RowError(f"row {name!r}: amp autocasts over fp32 weights; it takes no {row.dtype} weights")
    if not 1 <= row.batch_size <= MAX_BATCH:
        raise RowError(f"row {name!r}: batch size must be between 1 and {MAX_BATCH}")
    if not 1 <= row.seq_len <= MAX_SEQ_LEN:
        raise RowError(f"row {name!r}: sequence length must be between 1 and {MAX_SEQ_LEN}")
    if (row.mode == Mode.GENERATE) != (row.new_tokens > 0):
        raise RowError(f"row {name!r}: new tokens (n<count>) belong to generation rows (gen-...) only")
    if not 0 <= row.new_tokens <= MAX_NEW_TOKENS or row.positions > MAX_SEQ_LEN:
        raise RowError(f"row {name!r}: new tokens must be between 1 and {MAX_NEW_TOKENS}, and the prompt and "
                       f"new tokens at most {MAX_SEQ_LEN}")
    if row.tokens_per_step > MAX_TOKENS_PER_STEP:
        raise RowError(f"row {name!r}: {row.tokens_per_step} tokens per step is more than {MAX_TOKENS_PER_STEP}")
    if row.lora_rank < 0 or row.lora_rank > 1024:
        raise RowError(f"row {name!r}: LoRA rank must be between 1 and 1024")


def _check_savers(row: RowSpec, name: str) -> None:
    """Refuse savers that need what the row does not do: a loss, LoRA, one card."""
    if row.mode != Mode.TRAIN and (row.loss or row.offload or row.optimizer_in_backward or row.lora_all_linear):
        raise RowError(f"row {name!r}: the loss's program, offloading and the optimizer in backward only apply "
                       "to training rows")
    if row.lora_all_linear and not row.lora_rank:
        raise RowError(f"row {name!r}: alllin names LoRA's targets: add lora<r>")
    if row.sharding and (row.offload or row.optimizer_in_backward or row.optimizer == "paged_adamw8bit"):
        raise RowError(f"row {name!r}: offloading, paged state and the optimizer in backward are simulated on "
                       "one card only; drop the sharding")


# The default matrix, in the order it runs: the slow 16-bit row goes last so the quick rows land first.
DEFAULT_ROWS: tuple[str, ...] = ("baseline", "infer-b1", "infer-b8", "train-b1", "train-b2", "train-b4", "train-b8",
                                 "train-b4-s512", "train-b8-ckpt", "train-b8-lora8", "train-b8-bf16")


def default_matrix(seq_len: int = DEFAULT_SEQ_LEN) -> list[RowSpec]:
    """The rows `measure` runs when none are named. Lengths given explicitly (s512) stay as they are."""
    return [parse_row(row_id, seq_len) for row_id in DEFAULT_ROWS]


def under_allocators(rows: list[RowSpec], allocators: list[str]) -> list[RowSpec]:
    """Each row under each allocator asked for, rows that named their own allocator left as they are."""
    if not allocators:
        return rows
    out: list[RowSpec] = []
    for row in rows:
        for allocator in allocators if row.allocator == DEFAULT_ALLOCATOR else [row.allocator]:
            if row.with_allocator(allocator) not in out:
                out.append(row.with_allocator(allocator))
    return out


def select_rows(names: list[str], seq_len: int = DEFAULT_SEQ_LEN) -> list[RowSpec]:
    """Parse the rows a user named, keeping their order and dropping repeats."""
    rows: list[RowSpec] = []
    for name in names:
        row = parse_row(name, seq_len)
        if row not in rows:
            rows.append(row)
    return rows
