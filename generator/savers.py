"""The memory savers of 2026's fine-tuning recipes, as pure-torch copies that allocate what their references
allocate, run by the worker on real tensors and by the simulator on fake ones (generator/steps.py drives them):

- **chunked cross-entropy**: torchtune 0.6.1's ``CEWithChunkedOutputLoss``
  (``torchtune/modules/loss/ce_chunked_output_loss.py``) with the output projection its decoder runs on 8
  chunks of the sequence (``TransformerDecoder.set_num_output_chunks``), and the recipes' labels shifted by an
  ignored column (``recipes/full_finetune_single_device.py``, ``_loss_step``): every chunk's logits in the
  model's dtype, each upcast to fp32 only as its loss is taken;
- **fused linear cross-entropy**: Liger-Kernel 0.8.5's ``fused_linear_cross_entropy_forward``
  (``liger_kernel/ops/fused_linear_cross_entropy.py``): a block of tokens at a time, the head's logits are
  made, turned in place into the loss's gradient (its Triton kernel; here in-place torch operators), and
  multiplied into the gradients of the hidden states and of the head's weight, which the forward keeps for the
  backward; the whole logits never exist. The count of tokens that are not ignored is read from the batch's
  shape (every label but the last column's counts) where Liger calls ``.item()``: the same number, and no
  value a fake tensor has to give;
- **activation offloading**: torchtune 0.6.1's ``OffloadActivations`` (``torchtune/training/
  _activation_offloading.py``) on one stream: each tensor autograd saves in the decoder, of 1,024 bytes or more
  and neither a parameter nor a buffer, copied to host memory as it is saved and back to the device as backward
  reads it; the output head (which torchtune leaves alone with its ``NoOpManager``) and the loss run outside;
- **the optimizer step in backward**: torchtune 0.6.1's ``register_optim_in_bwd_hooks``
  (``torchtune/training/memory.py``): an optimizer per parameter, stepped and zeroed (its gradient freed) as soon
  as that gradient is accumulated.

torch is imported by each function that runs, so the row coordinates that name these stay torch-free."""

from collections.abc import Callable, Iterator
from typing import Any

CHUNKS = 8  # torchtune's num_output_chunks
IGNORE_INDEX = -100
MIN_OFFLOAD_BYTES = 1024  # OffloadActivations' min_offload_size


def shifted_labels(batch: Any) -> Any:
    """Each position's next token, the last position's ignored: torchtune's hstack of labels[..., 1:] and an
    ignore column (Liger's transformers loss pads the same way)."""
    import torch

    ignored = torch.full((batch.shape[0], 1), IGNORE_INDEX, dtype=batch.dtype, device=batch.device)
    return torch.hstack((batch[..., 1:], ignored))


def chunked_cross_entropy(head: Any, hidden: Any, batch: Any) -> Any:
    """torchtune's output projection on CHUNKS chunks, then CEWithChunkedOutputLoss.forward over them."""
    import torch.nn.functional as F

    logits = [head(chunk) for chunk in hidden.chunk(CHUNKS, dim=1)]
    labels = shifted_labels(batch)
    total_elements = (labels != IGNORE_INDEX).sum()
    label_chunks = [chunk.reshape(-1) for chunk in labels.chunk(CHUNKS, dim=1)]
    logit_chunks = [chunk.reshape(-1, chunk.size(-1)) for chunk in logits]
    del logits
    total: Any = 0.0
    for logit, label in zip(logit_chunks, label_chunks, strict=True):
        total += F.cross_entropy(logit.float(), label, ignore_index=IGNORE_INDEX, reduction="sum")
    return total / total_elements


def fused_chunk_size(tokens: int, hidden: int, vocab: int) -> int:
    """Liger's chunk: the tokens whose logits take about as much memory as the hidden states (chunk_mem_const 1),
    rounded up to a power of two, at most every token."""
    increase = -(-vocab // hidden)
    return min(1 << max(0, (-(-tokens // increase) - 1).bit_length()), tokens)


def fused_linear_cross_entropy(head: Any, hidden: Any, batch: Any, cuda: bool) -> Any:
    """Liger's fused linear cross-entropy of the head over the hidden states, mean-reduced."""
    function = _fused_function()
    labels = shifted_labels(batch).reshape(-1)
    counted = batch.shape[0] * (batch.shape[1] - 1)  # every label but each row's last (shifted_labels)
    return function.apply(hidden.reshape(-1, hidden.shape[-1]), head.weight, labels, head.bias, counted, cuda)


def _fused_function() -> Any:
    import torch

    class FusedLinearCrossEntropy(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, hidden: Any, weight: Any, labels: Any, bias: Any, counted: int, cuda: bool) -> Any:
            loss, grad_input, grad_weight, grad_bias = _fused_forward(hidden, weight, labels, bias, counted, cuda)
            ctx.save_for_backward(grad_input, grad_weight, grad_bias)
            return loss

        @staticmethod
        def backward(ctx: Any, grad_output: Any) -> Any:
            grad_input, grad_weight, grad_bias = ctx.saved_tensors  # scaled in place (element_mul_kernel)
            for grad in (grad_input, grad_weight, grad_bias):
                if grad is not None:
                    grad.mul_(grad_output)
            return grad_input, grad_weight, None, grad_bias, None, None

    return FusedLinearCrossEntropy


def _fused_forward(hidden: Any, weight: Any, labels: Any, bias: Any, counted: int,
                   cuda: bool) -> tuple[Any, Any, Any, Any]:
    """fused_linear_cross_entropy_forward with reduction "mean", no class weights, label smoothing or z-loss."""
    import torch

    tokens, size = hidden.shape
    chunk = fused_chunk_size(tokens, size, weight.shape[0])
    grad_input = torch.zeros_like(hidden)
    grad_weight = torch.zeros_like(weight) if weight.requires_grad else None
    grad_bias = torch.zeros_like(bias) if bias is not None and bias.requires_grad else None
    loss_1d = torch.zeros(tokens, dtype=torch.float32, device=hidden.device)
    for start in range(0, tokens, chunk):
        part, target = hidden[start:start + chunk], labels[start:start + chunk]
        logits = part @ weight.t()
        if bias is not None:
            logits = logits + bias
        loss_1d[start:start + chunk] = _loss_and_gradient_in_place(logits, target, counted)
        grad_input[start:start + chunk] = logits @ weight
        if grad_weight is not None:
            _accumulate(grad_weight, logits, part, cuda)
        if grad_bias is not None:
            grad_bias.add_(logits.sum(dim=0))
        del logits, part, target
    return torch.sum(loss_1d), grad_input, grad_weight, grad_bias


def _loss_and_gradient_in_place(logits: Any, target: Any, counted: int) -> Any:
    """liger_cross_entropy_kernel: each row's loss, and the row's logits overwritten with the mean loss's
    gradient (softmax minus the target's one, over the tokens counted; zero on an ignored row)."""
    import torch

    kept = (target != IGNORE_INDEX).unsqueeze(-1)
    safe = target.clamp(min=0).unsqueeze(-1)
    largest = logits.amax(dim=-1, keepdim=True)
    picked = logits.gather(-1, safe)
    logits.sub_(largest).exp_()
    sums = logits.sum(dim=-1, keepdim=True)  # in the logits' dtype: the in-place division below then makes nothing
    loss = ((sums.log() + largest - picked) * kept).squeeze(-1) / counted
    logits.div_(sums).scatter_add_(-1, safe, -torch.ones_like(picked)).mul_(kept).div_(counted)
    return loss


def _accumulate(grad_weight: Any, gradient: Any, part: Any, cuda: bool) -> None:
    """The head's gradient, chunk by chunk: CUDA's in-place addmm for 16-bit weights on sm80 or newer (Liger's
    second branch), else a product made, upcast and added (its last branch, the CPU's)."""
    import torch

    if cuda and grad_weight.dtype in (torch.float16, torch.bfloat16) and gradient.dtype == grad_weight.dtype:
        torch.addmm(grad_weight, gradient.t(), part.to(gradient.dtype), out=grad_weight)
        return
    product = torch.mm(gradient.t(), part).float()
    if grad_weight.dtype == product.dtype:
        grad_weight += product
        return
    # a 16-bit gradient += an fp32 product: on a CPU, TensorIterator computes in fp32, into an output of its own,
    # from an fp32 copy of the 16-bit operand, and copies back (torch.profiler shows both: empty_like, _to_copy);
    # spelled out so that a dispatch mode sees the two storages as well
    widened = grad_weight.float()
    grad_weight.copy_(torch.add(widened, product, out=torch.empty_like(widened)))


class Offloaded:
    """OffloadActivations on one stream (its context is ``hooks``): saved tensors copied to the host as they are
    saved, back as backward reads them. ``host`` is the context the host's copies are made in where the
    simulation runs a GPU's program on the CPU's fake tensors (the copy back is then a new device tensor); None
    where host and device are the tensors' own devices."""

    def __init__(self, host: Callable[[], Any] | None) -> None:
        import torch

        self.saved: dict[int, tuple[Any, Any]] = {}  # key -> (the tensor kept, the device it came from or None)
        self.count, self.host = 0, host
        self.hooks = torch.autograd.graph.saved_tensors_hooks(self.pack, self.unpack)

    def pack(self, activation: Any) -> int:
        import torch

        self.count += 1
        heavy = activation.element_size() * activation.nelement() >= MIN_OFFLOAD_BYTES
        if heavy and not isinstance(activation, (torch.nn.Parameter, torch.nn.Buffer)):
            self.saved[self.count] = (self._to_host(activation), activation.device)
        else:
            self.saved[self.count] = (activation, None)
        return self.count

    def _to_host(self, activation: Any) -> Any:
        import contextlib

        import torch

        with self.host() if self.host is not None else contextlib.nullcontext():
            copy = torch.empty_like(activation, device="cpu", pin_memory=activation.is_cuda)
            copy.copy_(activation, non_blocking=True)
        return copy

    def unpack(self, key: int) -> Any:
        tensor, device = self.saved.pop(key)
        if device is None:
            return tensor
        if self.host is not None:
            return tensor.clone()  # the copy back, a device tensor
        return tensor.to(device, non_blocking=True)


class InBackward:
    """torchtune's optimizer in backward: one optimizer per trainable parameter, each stepped and zeroed
    (set_to_none) by a hook as its parameter's gradient is accumulated. The hooks go on when the steps begin
    (``attach``), after any a simulation puts on to learn what the gradients are; ``step`` and ``zero_grad``
    have nothing left to do."""

    def __init__(self, make: Callable[[list[Any]], Any], parameters: list[Any]) -> None:
        self.optimizers = {id(p): (p, make([p])) for p in parameters}
        self.attached = False

    @property
    def inner(self) -> tuple[Any, ...]:
        return tuple(optimizer for _, optimizer in self.optimizers.values())

    def attach(self) -> None:
        if self.attached:
            return
        self.attached = True
        for parameter, optimizer in self.optimizers.values():
            parameter.register_post_accumulate_grad_hook(_stepper(optimizer))

    def register_step_pre_hook(self, hook: Callable[..., Any]) -> None:
        for optimizer in self.inner:
            optimizer.register_step_pre_hook(hook)

    def register_step_post_hook(self, hook: Callable[..., Any]) -> None:
        for optimizer in self.inner:
            optimizer.register_step_post_hook(hook)

    def step(self) -> None:
        """Done in backward."""

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Done in backward."""


def _stepper(optimizer: Any) -> Callable[[Any], None]:
    def step(_: Any) -> None:
        optimizer.step()
        optimizer.zero_grad()
    return step


def each_optimizer(optimizer: Any) -> Iterator[Any]:
    """The optimizers that update a row's parameters: the one, or the optimizer in backward's per parameter."""
    yield from getattr(optimizer, "inner", () if optimizer is None else (optimizer,))
