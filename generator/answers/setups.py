"""The set-ups a "will it fit?" answer is given for, declared once: a short id the files key its curves by, the
name a person asks about (presentation only, so rewording it changes no file), the row that
answers it ({b} the batch, {s} the length), its precision and recipe in words, and whether it is one of the
set-ups people run on a GPU (listed first) or one the measured matrix covers on a CPU.

`fit`, the fit page, its legend and the article's first screen all read this one declaration, so renaming or
adding a set-up is one line here."""

from dataclasses import dataclass, replace
from typing import Any

from generator.coordinates import LOSSES, OPTIMIZER_TOKENS, PartError, labels, parse_part
from generator.matrix import Mode, RowSpec, parse_row, sharding_token


@dataclass(frozen=True)
class Setup:
    """One way of running a model that an answer is given for."""

    id: str  # short and stable: the key of its curves in the files (_fit.toml, _curves/); never shown
    name: str  # what a person asks about, on the pages and in fit's output: presentation only
    row: str  # the row that answers it, with {b} the batch and {s} the length
    recipe: str  # precision and recipe, as the CLI and the fit page's legend state it
    first_screen: bool = False  # one of the measured model's answers on the article's first screen
    library: str = ""  # a library the set-up needs beyond torch, transformers and peft


SETUPS = (  # the set-ups people run come first; the fp32 ones are what the measured matrix covers on a CPU
    Setup("gen", "generation", "gen-b{b}-s{s}-n32-bf16",
          "bf16 weights, the prompt then 32 new tokens with the KV cache", first_screen=True),
    Setup("amp", "mixed-precision training", "train-b{b}-s{s}-amp",
          "fp32 weights and AdamW state, bf16 autocast: 16 bytes a parameter before activations, plus the bf16 "
          "copies of the weights that autocast keeps"),
    Setup("bf16-lora", "LoRA on a bf16 base", "train-b{b}-s{s}-bf16-lora8",
          "rank-8 adapters on a bf16 base (peft's default targets, q_proj and v_proj for Llama), AdamW on the "
          "adapters", first_screen=True),
    Setup("qlora", "QLoRA", "train-b{b}-s{s}-bf16-nf4-lora8",
          "a 4-bit NF4 base (bitsandbytes, double-quantized scales, bf16 compute; embeddings and head in bf16), "
          "rank-8 adapters on peft's default targets, AdamW on the adapters", library="bitsandbytes"),
    Setup("amp-adam8", "mixed precision, 8-bit AdamW", "train-b{b}-s{s}-amp-adam8",
          "fp32 weights and gradients, bitsandbytes' AdamW8bit (a byte a moment plus fp32 scales per 256), "
          "bf16 autocast", library="bitsandbytes"),
    Setup("ckpt-bf16-lora", "LoRA + checkpointing", "train-b{b}-s{s}-ckpt-bf16-lora8",
          "rank-8 adapters on a bf16 base (peft's default targets), AdamW on the adapters, activations "
          "recomputed in backward"),
    Setup("ckpt-qlora", "QLoRA + checkpointing", "train-b{b}-s{s}-ckpt-bf16-nf4-lora8",
          "a 4-bit NF4 base (bitsandbytes, bf16 compute), rank-8 adapters on peft's default targets, AdamW on the "
          "adapters, activations recomputed in backward", library="bitsandbytes"),
    Setup("alllin-lora", "LoRA on all linear layers", "train-b{b}-s{s}-ckpt-bf16-lora8-alllin",
          "rank-8 adapters on every linear layer but the head (peft's all-linear) of a bf16 base, AdamW on the "
          "adapters, activations recomputed in backward"),
    Setup("saver-full", "memory-saver full fine-tune", "train-b{b}-s{s}-ckpt-bf16-padam8-optbwd-cce",
          "torchtune's single-device full recipe: bf16 weights and gradients, bitsandbytes' PagedAdamW8bit (its "
          "state in unified memory, outside the card's figure; fit and predict state it apart) stepped in "
          "backward, chunked cross-entropy, activations recomputed in backward", library="bitsandbytes"),
    Setup("infer", "inference", "infer-b{b}-s{s}", "fp32 weights, one forward pass without a KV cache"),
    Setup("full", "full training", "train-b{b}-s{s}", "fp32 weights, gradients and AdamW state, two steps",
          first_screen=True),
    Setup("ckpt", "gradient checkpointing", "train-b{b}-s{s}-ckpt", "fp32, AdamW, activations recomputed in backward"),
    Setup("bf16", "16-bit training", "train-b{b}-s{s}-bf16",
          "bf16 weights, gradients and AdamW state (8 bytes a parameter), no fp32 master copy"),
    Setup("lora", "LoRA", "train-b{b}-s{s}-lora8", "rank-8 adapters on an fp32 base, AdamW on the adapters"),
)
# The order fit starts the set-ups in when they run side by side: the longest simulations first (timed in SmolLM2's
# fit: generation's decode path runs each small depth twice, QLoRA imports bitsandbytes and quantizes its base), and
# inference, the shortest, last, so that the workers finish together. Only the wall time depends on it: each
# set-up is searched on its own, and the answers are given in SETUPS' order.
START_ORDER = ("generation", "QLoRA", "QLoRA + checkpointing", "memory-saver full fine-tune",
               "mixed-precision training", "gradient checkpointing", "LoRA on all linear layers",
               "LoRA + checkpointing",
               "LoRA on a bf16 base", "LoRA", "full training", "16-bit training", "mixed precision, 8-bit AdamW",
               "inference")
BY_NAME = {setup.name: setup for setup in SETUPS}
BY_ID = {setup.id: setup for setup in SETUPS}
KINDS = {setup.name: setup.row for setup in SETUPS}  # name -> row template, in the order answers are given
RECIPES = {setup.name: setup.recipe for setup in SETUPS}
FIRST_SCREEN = ("full training", "LoRA on a bf16 base", "generation")  # the first screen's order
SHARDING_NAMES = {"ddp": "DDP (nothing sharded)", "zero1": "ZeRO-1 (optimizer state)",
                  "zero2": "ZeRO-2 (optimizer state and gradients)",
                  "zero3": "ZeRO-3 or FSDP (optimizer state, gradients and weights)",
                  "fsdp": "FSDP (optimizer state, gradients and weights)"}


SHARDED_ONLY = {"ckpt-bf16": "16-bit training, checkpointed"}  # a set-up the sharded section answers, fit not


def setup_name(setup_id: str) -> str:
    """A set-up's name for a page or the terminal, from the id its curves are filed under (an id no set-up has,
    as in a file of another release, is shown as it is)."""
    return BY_ID[setup_id].name if setup_id in BY_ID else SHARDED_ONLY.get(setup_id, setup_id)


# The tokens `fit --with` adds to every training set-up: the memory savers, checkpointing and the 8-bit optimizers
WITH_TOKENS = ("ckpt", *LOSSES, "offload", "optbwd", OPTIMIZER_TOKENS["adamw8bit"], OPTIMIZER_TOKENS["paged_adamw8bit"],
               "alllin")


def row_template(name: str, sharding: tuple[str, int] | None = None, extra: tuple[str, ...] = ()) -> str:
    """The row that answers a set-up, {b} the batch and {s} the length; for a training set-up, with the
    ``extra`` tokens (WITH_TOKENS) each in place of the set-up's own for the same coordinate, and with sharding
    (a key of matrix.SHARDED_KINDS and a number of GPUs) its per-card row (inference and generation run whole on
    each card, as they are)."""
    template = KINDS[name]
    if parse_row(template.format(b=1, s=1)).mode != Mode.TRAIN:
        return template
    template = with_tokens(template, extra)
    if sharding is None:
        return template
    return f"{template}-{sharding_token(*sharding)}"  # the sharding token is a row's last, before cap and allocator


def with_words(tokens: tuple[str, ...]) -> list[str]:
    """What `fit --with` tokens turn on, in words (a LoRA row's phrases, less those of the row without them)."""
    base = RowSpec(Mode.TRAIN, 1, 1, lora_rank=8)
    before = set(labels(base))
    words = []
    for token in tokens:
        fields: dict[str, Any] = parse_part(token) or {}
        found = [text for text in labels(replace(base, **fields)) if text not in before]
        words += found or ["8-bit AdamW (bitsandbytes)" if token == OPTIMIZER_TOKENS["adamw8bit"] else token]
    return words


def with_tokens(template: str, tokens: tuple[str, ...]) -> str:
    """A row template with each token added, in place of any part that sets the same coordinate."""
    parts = template.split("-")
    for token in tokens:
        fields = set(_fields(token))
        parts = [part for part in parts if not fields & set(_fields(part))] + [token]
    return "-".join(parts)


def _fields(part: str) -> dict[str, object]:
    """The fields a template's part sets ({} for its mode, batch and length, which carry no value yet)."""
    if "{" in part:
        return {}
    try:
        return parse_part(part) or {}
    except PartError:
        return {}
