"""The memory savers (generator/savers.py) run their references' algorithms: each gives the loss and the gradients
of the plain program it replaces, on small real tensors; the host memory of a GPU's program is counted apart from
its device peak; the row tokens compose and refuse what cannot run."""

import pytest
import torch
import torch.nn.functional as F

from generator import savers
from generator.coordinates import savers as savers_on
from generator.matrix import RowError, parse_row
from generator.predict.exact.tracker import HOST, StorageTracker, peak_and_trace


def _plain_loss(head: torch.nn.Linear, hidden: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
    logits = head(hidden)[:, :-1].reshape(-1, head.out_features)
    return F.cross_entropy(logits.float(), batch[:, 1:].reshape(-1))


def _inputs(vocab: int = 97, size: int = 16, batch: int = 3, length: int = 24):
    torch.manual_seed(0)
    head = torch.nn.Linear(size, vocab, bias=False)
    hidden = torch.randn(batch, length, size, requires_grad=True)
    return head, hidden, torch.randint(0, vocab, (batch, length))


def _gradients(loss_of) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    head, hidden, batch = _inputs()
    loss = loss_of(head, hidden, batch)
    loss.backward()
    return loss.detach(), hidden.grad, head.weight.grad


@pytest.mark.parametrize("loss_of", [savers.chunked_cross_entropy,
                                     lambda h, x, b: savers.fused_linear_cross_entropy(h, x, b, cuda=False)],
                         ids=["chunked", "fused"])
def test_each_loss_program_gives_the_plain_loss_and_gradients(loss_of) -> None:
    expected = _gradients(_plain_loss)
    found = _gradients(loss_of)
    for mine, plain in zip(found, expected, strict=True):
        torch.testing.assert_close(mine, plain, rtol=1e-5, atol=1e-6)


def test_fused_chunks_follow_liger_rule() -> None:
    """Liger's chunk for Llama-3-8B's head at 4,096 tokens: cdiv(128256, 4096) = 32 → 4096 / 32 = 128 tokens."""
    assert savers.fused_chunk_size(4096, 4096, 128256) == 128
    assert savers.fused_chunk_size(100, 64, 64) == 100  # one chunk covers every token, never more
    assert savers.fused_chunk_size(1000, 64, 6400) == 16  # cdiv(1000, 100) = 10 → the next power of two


def test_offloading_copies_what_backward_saves_and_changes_no_gradient() -> None:
    torch.manual_seed(0)
    layer = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.GELU(), torch.nn.Linear(64, 32))
    x = torch.randn(8, 32, requires_grad=True)
    layer(x).sum().backward()
    plain = [p.grad.clone() for p in layer.parameters()]
    layer.zero_grad()
    offloaded = savers.Offloaded(None)
    with offloaded.hooks:
        out = layer(x)
    assert any(device is not None for _, device in offloaded.saved.values())  # heavy activations were moved
    out.sum().backward()
    assert offloaded.saved == {}  # each read back once
    for mine, expected in zip((p.grad for p in layer.parameters()), plain, strict=True):
        torch.testing.assert_close(mine, expected)


def test_the_optimizer_in_backward_steps_as_the_optimizer_after_it() -> None:
    torch.manual_seed(0)
    plain, early = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)
    early.load_state_dict(plain.state_dict())
    x = torch.randn(5, 8)
    after = torch.optim.AdamW(plain.parameters(), lr=0.1)
    plain(x).square().sum().backward()
    after.step()
    during = savers.InBackward(lambda one: torch.optim.AdamW(one, lr=0.1), list(early.parameters()))
    during.attach()
    early(x).square().sum().backward()
    assert all(p.grad is None for p in early.parameters())  # each gradient freed as soon as it was used
    for mine, expected in zip(early.parameters(), plain.parameters(), strict=True):
        torch.testing.assert_close(mine, expected)


def test_host_memory_is_counted_apart_from_the_device() -> None:
    tracker = StorageTracker()
    tracker.made("w", 100, "weights")
    tracker.made("h", 1000, HOST)
    tracker.kind("h", "optimizer")  # a paged moment found to be optimizer state stays host memory
    tracker.made("a", 50, "activations")
    tracker.freed("h")
    tracker.freed("a")
    tracker.finish()
    assert (tracker.peak, tracker.host_peak, tracker.totals["optimizer"]) == (150, 1000, 0)
    replayed = StorageTracker.replay_whole(tracker.journal)
    assert (replayed.peak, replayed.host_peak) == (150, 1000)
    trace = [("w", 100, True), ("a", 50, True), ("a", 50, False)]
    assert peak_and_trace(tracker.journal) == (150, "load", trace, 1000)


def test_the_saver_tokens_compose_and_say_what_is_on() -> None:
    row = parse_row("train-b2-s512-ckpt-bf16-padam8-optbwd-cce")
    assert row.id == "train-b2-s512-ckpt-bf16-padam8-optbwd-cce" and row.loss == "chunked"
    assert savers_on(row) == ["paged 8-bit AdamW (bitsandbytes)", "the optimizer step in backward",
                              "chunked cross-entropy (torchtune)"]
    spelled = parse_row("train-b1-bf16-nf4-lora8-alllin-offload-flce").id
    assert spelled == "train-b1-s256-bf16-nf4-lora8-alllin-flce-offload"
    assert savers_on(parse_row("train-b1")) == []


@pytest.mark.parametrize("text, reason", [("infer-b1-cce", "only apply to training rows"),
                                          ("train-b1-alllin", "add lora<r>"),
                                          ("train-b1-offload-zero2x2", "one card only")])
def test_a_saver_that_cannot_run_is_refused(text: str, reason: str) -> None:
    with pytest.raises(RowError, match=reason):
        parse_row(text)


def test_fit_with_adds_each_token_to_the_training_setups_in_place_of_their_own() -> None:
    from generator.answers.setups import row_template, with_words

    assert row_template("memory-saver full fine-tune", extra=("flce", "offload")) == \
        "train-b{b}-s{s}-ckpt-bf16-padam8-optbwd-flce-offload"  # the set-up's chunked loss gives way to the fused one
    assert row_template("LoRA", ("zero3", 4), ("adam8",)) == "train-b{b}-s{s}-lora8-adam8-zero3x4"
    assert row_template("generation", extra=("flce",)) == "gen-b{b}-s{s}-n32-bf16"  # no loss to change
    assert with_words(("flce", "padam8", "adam8")) == ["fused linear cross-entropy (Liger)",
                                                       "paged 8-bit AdamW (bitsandbytes)", "8-bit AdamW (bitsandbytes)"]


def test_fit_with_refuses_a_token_it_does_not_add_in_one_line() -> None:
    from generator.cli.parser import with_tokens

    assert with_tokens("flce, offload") == ("flce", "offload")
    for text in ("nope", "cce,cce", "lora8", ""):
        with pytest.raises(Exception, match="not a list of distinct tokens"):
            with_tokens(text)


def test_a_checkpointed_4bit_base_is_simulated_at_full_depth() -> None:
    """Its trace does not extend by depth (quantize.checkpointed_four_bit): the fast path gives no answer."""
    from generator.model_source import resolve_model
    from generator.predict.exact.cuda_program import CPU
    from generator.predict.fast.small_depths import simulate_by_depth

    source = resolve_model("SmolLM2-135M-Instruct")
    assert simulate_by_depth(parse_row("train-b1-s16-ckpt-bf16-nf4-lora8"), source, CPU) is None


def test_fit_states_the_host_memory_beside_the_card() -> None:
    """An offloading set-up's answer on a GPU carries the host memory its copies take, which the card's figure
    leaves out; the same set-up without offloading has none."""
    from conftest import TESTS

    from generator.budget import ProcessModel
    from generator.model_source import resolve_model
    from generator.predict.fit import Predictor, largest_batch

    source = resolve_model(str(TESTS / "tiny-llama.json"))
    plain = ProcessModel(0.0, 0.0, 0, "")
    offloaded = largest_batch(Predictor(source, plain, target="gpu", extra=("offload",)), "LoRA", 32, 2**30)
    kept = largest_batch(Predictor(source, plain, target="gpu"), "LoRA", 32, 2**30)
    assert offloaded.row.endswith("-offload") and offloaded.host_bytes > 0 and kept.host_bytes == 0
