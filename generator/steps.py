"""One definition of a row's work, driven by two callers through a phase callback:

- the worker (generator/measure/worker.py), with real tensors, whose callback reads the process's peak;
- the simulator (generator/predict/simulate.py), with fake tensors, whose callback reads the live tensor storages.

``prepare`` turns a built model into the row's model, optimizer and batch; ``run_steps`` runs the row's two
steps, calling ``on_phase(name)`` as each phase begins: forward, backward and optimizer for step 1, then
step2 (inference rows: forward, then step2; generation rows: forward (the prompt, filling the KV cache) and
decode (one new token at a time, reading and growing the cache), then step2, a second generation)."""

import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from generator.matrix import Mode, RowSpec

PhaseCallback = Callable[[str], None]


class LoraTargetError(ValueError):
    """A LoRA row on an architecture peft names no default target modules for."""


@dataclass
class Prepared:
    """What the steps need: the model in its row's mode, the optimizer (training rows) and a batch."""

    model: Any  # a transformers PreTrainedModel, or a peft PeftModel around one
    optimizer: Any  # torch.optim.AdamW, or None for inference
    batch: Any  # a LongTensor of token ids, batch × length
    lora_targets: tuple[str, ...] = ()
    # the step's autocast, given whether it is on; None: torch's own for the batch's device. The simulation of a
    # GPU's program gives CUDA's here (generator/predict/exact/cuda_program.py).
    autocast: Callable[[bool], Any] | None = None
    loss: str = ""  # the loss's program (coordinates.LOSSES); "" is transformers' own
    offload: bool = False  # the decoder's saved activations offloaded to the host (generator/savers.py)
    # where the simulation runs a GPU's program on the CPU's fake tensors, the context host memory is made in
    # (the host copies of offloading, the paged optimizer state); None where the batch's device is the device
    host: Callable[[], Any] | None = None

    @property
    def cuda(self) -> bool:
        """Whether the steps run CUDA's program: on a CUDA device, or simulated for one."""
        return self.host is not None or self.batch.device.type == "cuda"


# Architectures peft names no default for, with the attention projections LoRA usually adapts in them:
# Phi-3 fuses query, key and value into one qkv_proj; the MoE variants keep their dense siblings' names.
EXTRA_LORA_TARGETS = {"phi3": ("qkv_proj",), "qwen2_moe": ("q_proj", "v_proj"), "qwen3_moe": ("q_proj", "v_proj"),
                      "olmoe": ("q_proj", "v_proj"), "granitemoe": ("q_proj", "v_proj")}


def default_lora_targets(model_type: str) -> tuple[str, ...]:
    """peft's default target modules for an architecture (q_proj and v_proj for Llama, c_attn for GPT-2), else
    this tool's for the common architectures peft does not name."""
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as DEFAULTS

    targets = DEFAULTS.get(model_type) or EXTRA_LORA_TARGETS.get(model_type)
    if not targets:
        raise LoraTargetError(f"no default LoRA target modules for model_type {model_type!r}; "
                              "name them with --lora-targets (e.g. --lora-targets q_proj,v_proj)")
    return tuple(targets)


def with_lora(model: Any, row: RowSpec, targets: tuple[str, ...] = ()) -> tuple[Any, tuple[str, ...]]:
    """The model with LoRA adapters of the row's rank on the targets given, else the architecture's defaults."""
    import peft

    if row.lora_all_linear and targets:
        raise LoraTargetError("alllin names LoRA's targets (every linear layer but the head): drop --lora-targets")
    targets = targets or (() if row.lora_all_linear else default_lora_targets(model.config.model_type))
    config = peft.LoraConfig(r=row.lora_rank, lora_alpha=2 * row.lora_rank, lora_dropout=0.0,
                             target_modules=list(targets) or "all-linear", task_type="CAUSAL_LM")
    with warnings.catch_warnings():  # library notes that are not the user's business, silenced here only:
        # peft reads transformers' deprecated is_gradient_checkpointing, and sets fan_in_fan_out itself for
        # GPT-2's Conv1D layers (the right setting, which it announces on every LoRA row)
        warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
        warnings.filterwarnings("ignore", message=".*fan_in_fan_out.*", category=UserWarning)
        # and, where a target is a tied head (Gemma's lm_head), that merging such an adapter needs care
        warnings.filterwarnings("ignore", message=".*tie_word_embeddings.*", category=UserWarning)
        # and, resolving all-linear on a fused MLP (Phi-3's gate_up_proj), that its own patterns matched nothing
        warnings.filterwarnings("ignore", message=".*did not match any targeted module.*", category=RuntimeWarning)
        model = peft.get_peft_model(model, config)
    # all-linear resolves to each module's path; its name is what a row's targets say (q_proj, not layers.0.q_proj)
    return model, targets or tuple(sorted({name.rsplit(".", 1)[-1]
                                           for name in model.peft_config["default"].target_modules}))


def enable_checkpointing(model: Any) -> None:
    """Activation (gradient) checkpointing with non-reentrant autograd, through the API the installed
    transformers names: activation_checkpointing_enable from 5.x on (gradient_checkpointing_enable is
    deprecated there and warns on every call), gradient_checkpointing_enable before it."""
    options = {"use_reentrant": False}
    if hasattr(model, "activation_checkpointing_enable"):
        model.activation_checkpointing_enable(activation_checkpointing_kwargs=options)
    else:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs=options)


def make_optimizer(row: RowSpec, parameters: list[Any]) -> Any:
    """The row's optimizer over the parameters that train: torch's AdamW, or bitsandbytes' 8-bit AdamW, paged
    or not; with the optimizer in backward, one of them per parameter (generator/savers.py)."""
    from generator.savers import InBackward

    if row.optimizer_in_backward:
        return InBackward(lambda one: _optimizer(row, one), parameters)
    return _optimizer(row, parameters)


def _optimizer(row: RowSpec, parameters: list[Any]) -> Any:
    import torch

    from generator.quantize import EIGHT_BIT_OPTIMIZERS, LEARNING_RATE, adamw_8bit

    if row.optimizer in EIGHT_BIT_OPTIMIZERS:
        return adamw_8bit(parameters, paged=row.optimizer == "paged_adamw8bit")
    return torch.optim.AdamW(parameters, lr=LEARNING_RATE)


def build_context(row: RowSpec, random_init: bool) -> Any:
    """What the worker builds a row's model in: for a 4-bit base made from a config, its linear weights are
    deferred, so that the full-precision model never exists at once (generator/quantize.py)."""
    import contextlib

    from generator.quantize import linear_weights_deferred

    return linear_weights_deferred() if row.quantization and random_init else contextlib.nullcontext()


def prepare(model: Any, row: RowSpec, device: str = "cpu", lora_targets: tuple[str, ...] = ()) -> Prepared:
    """A 4-bit base (quantized where it was built, on the CPU), the move to the device, gradient
    checkpointing, LoRA, train or eval mode, the optimizer and a batch of random tokens."""
    import torch

    from generator.quantize import quantize_nf4

    if row.quantization == "nf4":
        model = quantize_nf4(model)
    model = model.to(device)
    model.config.use_cache = False
    if getattr(model, "loss_type", "") is None:  # transformers 5 would log that it picks this default itself
        model.loss_type = "ForCausalLM"
    targets: tuple[str, ...] = ()
    optimizer = None
    if row.mode != Mode.TRAIN:
        model.eval()
    else:
        if row.gradient_checkpointing:
            enable_checkpointing(model)
        if row.lora_rank:
            model, targets = with_lora(model, row, lora_targets)
        model.train()
        optimizer = make_optimizer(row, [p for p in model.parameters() if p.requires_grad])
    batch = torch.randint(0, model.config.vocab_size, (row.batch_size, row.seq_len), device=device)
    return Prepared(model=model, optimizer=optimizer, batch=batch, lora_targets=targets, loss=row.loss,
                    offload=row.offload)


def _autocast(prepared: Prepared, enabled: bool) -> Any:
    """bf16 autocast for mixed-precision rows (fp32 weights and AdamW state, bf16 compute), else nothing."""
    import torch

    if prepared.autocast is not None:
        return prepared.autocast(enabled)
    return torch.autocast(prepared.batch.device.type, dtype=torch.bfloat16, enabled=enabled)


def train_step(prepared: Prepared, step: int, on_phase: PhaseCallback, amp: bool = False) -> None:
    """One full optimizer step. Step 1 is split into phases; later steps are one phase each."""
    on_phase("forward" if step == 1 else f"step{step}")
    if hasattr(prepared.optimizer, "attach"):  # the optimizer in backward's hooks, after any already on
        prepared.optimizer.attach()
    with _autocast(prepared, amp):
        if prepared.loss or prepared.offload:
            loss = _saver_loss(prepared)
        else:
            loss = prepared.model(input_ids=prepared.batch, labels=prepared.batch).loss
    if step == 1:
        on_phase("backward")
    loss.backward()
    if step == 1:
        on_phase("optimizer")
    prepared.optimizer.step()
    prepared.optimizer.zero_grad(set_to_none=False)


def _saver_loss(prepared: Prepared) -> Any:
    """The loss as torchtune's recipes take it: the decoder's forward (its saved activations offloaded where the
    row says), then the head and the loss's program outside it (generator/savers.py)."""
    import contextlib

    from generator import savers

    model = prepared.model.get_base_model() if hasattr(prepared.model, "get_base_model") else prepared.model
    head, batch = model.get_output_embeddings(), prepared.batch
    offloading = savers.Offloaded(prepared.host).hooks if prepared.offload else contextlib.nullcontext()
    with offloading:
        hidden = model.base_model(input_ids=batch).last_hidden_state
    if prepared.loss == "chunked":
        return savers.chunked_cross_entropy(head, hidden, batch)
    if prepared.loss == "fused":
        return savers.fused_linear_cross_entropy(head, hidden, batch, prepared.cuda)
    return model.loss_function(logits=head(hidden), labels=batch, vocab_size=model.config.vocab_size)


def inference_pass(prepared: Prepared, step: int, on_phase: PhaseCallback) -> None:
    """One forward pass without autograd."""
    import torch

    on_phase("forward" if step == 1 else f"step{step}")
    with torch.no_grad():
        prepared.model(input_ids=prepared.batch)


def generate_pass(prepared: Prepared, step: int, on_phase: PhaseCallback, new_tokens: int) -> None:
    """Greedy generation with the KV cache as generate() runs it, written out so that the same code runs on
    fake tensors: the prompt in one forward pass that keeps only the last position's logits, then one token at
    a time. Like generate(), each step copies the last position's logits to fp32 (what it picks the token from)
    and drops the forward's output before the next forward, so that copy is what lives across it."""
    import torch

    name, keep = cache_argument(prepared.model), last_logits_argument(prepared.model)
    on_phase("forward" if step == 1 else f"step{step}")
    with torch.no_grad():
        cache, logits, token = _next_token(prepared.model(input_ids=prepared.batch, use_cache=True, **keep), name)
        if step == 1:
            on_phase("decode")
        for _ in range(new_tokens - 1):  # the last new token needs no forward pass of its own
            cache, logits, token = _next_token(
                prepared.model(input_ids=token, use_cache=True, **keep, **{name: cache}), name)
    del cache, logits


def _next_token(output: Any, name: str) -> tuple[Any, Any, Any]:
    """What generate() keeps of a forward pass: the cache, an fp32 copy of the last position's logits (what
    it picks the token from, alive across the next pass) and the greedy token; the output itself is dropped."""
    import torch

    logits = output.logits[:, -1].to(copy=True, dtype=torch.float32)
    return getattr(output, name), logits, logits.argmax(-1, keepdim=True)


def _forward_parameters(model: Any) -> Any:
    """The parameters of the causal LM's own forward (a peft model's base model's, as generate() reads them)."""
    import inspect

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return inspect.signature(base.forward).parameters


def last_logits_argument(model: Any) -> dict[str, int]:
    """What generate() passes so that a forward pass computes the last position's logits only:
    logits_to_keep=1 (transformers 4.50 on), num_logits_to_keep=1 (4.45 to 4.49). Before that generate()
    passed nothing, and the prompt's pass computed every position's logits, so nothing is passed here either."""
    parameters = _forward_parameters(model)
    return next(({name: 1} for name in ("logits_to_keep", "num_logits_to_keep") if name in parameters), {})


def cache_argument(model: Any) -> str:
    """What the installed transformers calls the KV cache: `cache` from 5.2x on, `past_key_values` before."""
    return "cache" if "cache" in _forward_parameters(model) else "past_key_values"


def run_steps(row: RowSpec, prepared: Prepared, on_phase: PhaseCallback,
              on_step_done: Callable[[], None] | None = None) -> None:
    """The row's steps, in order, under the 4-bit matmul of the bitsandbytes release the row names."""
    from generator.quantize import matmul_4bit_program

    with matmul_4bit_program(row):
        for step in range(1, row.steps + 1):
            if row.mode == Mode.TRAIN:
                train_step(prepared, step, on_phase, row.amp)
            elif row.mode == Mode.GENERATE:
                generate_pass(prepared, step, on_phase, row.new_tokens)
            else:
                inference_pass(prepared, step, on_phase)
            if on_step_done is not None:
                on_step_done()
