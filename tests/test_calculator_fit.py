"""The fit page's calculator against `fit --format json`, run as a user runs it, at 20 (model, set-up, budget,
length, target) points, 120 and 1,000 GiB among them: where the calculator answers, fit's answer is the same batch,
bytes and usable budget, in the same words as the page's tables, read from the same curve; where the budget lies
past the simulated curve the calculator says so and answers nothing, and fit, which then simulates, finds a batch
at or past the curve's last one (the reader's 1,000 GiB, where the page once said 128 and fit 290). Two of the
points lie past their curves: each such `fit` simulates, the others read the curve."""

import json
from collections import defaultdict
from pathlib import Path

from conftest import run_cli
from test_browser import _open, browser, fresh_site, server  # noqa: F401 - the browser suite's fixtures

MEASUREMENTS = Path(__file__).resolve().parent.parent / "measurements"
POINTS = (  # (model, set-up, GiB typed, tokens a sequence, target)
    ("SmolLM2-135M-Instruct", "full training", 120, 1024, "gpu"),
    ("SmolLM2-135M-Instruct", "full training", 64, 1024, "gpu"),
    ("SmolLM2-135M-Instruct", "memory-saver full fine-tune", 120, 1024, "gpu"),
    ("SmolLM2-135M-Instruct", "LoRA on a bf16 base", 120, 1024, "cpu"),
    ("SmolLM2-135M-Instruct", "generation", 13.75, 1024, "gpu"),
    ("SmolLM2-135M-Instruct", "QLoRA", 1000, 512, "cpu"),
    ("Llama-2-7b", "LoRA on a bf16 base", 24, 1024, "gpu"),
    ("Llama-2-7b", "QLoRA", 24, 1024, "gpu"),
    ("Llama-2-7b", "full training", 120, 1024, "gpu"),
    ("Llama-2-7b", "full training", 1000, 1024, "gpu"),
    ("Llama-2-7b", "QLoRA + checkpointing", 80, 1024, "gpu"),
    ("Llama-2-7b", "16-bit training", 120, 1024, "cpu"),
    ("Llama-2-7b", "LoRA on a bf16 base", 24, 2048, "gpu"),
    ("Qwen2-0.5B", "mixed-precision training", 40, 1024, "gpu"),
    ("Qwen2-0.5B", "gradient checkpointing", 16, 1024, "gpu"),
    ("Qwen2-0.5B", "inference", 64, 1024, "cpu"),
    ("Qwen2-0.5B", "full training", 48, 4096, "gpu"),
    ("Llama-3.2-1B", "LoRA + checkpointing", 120, 1024, "gpu"),
    ("Llama-3.2-1B", "memory-saver full fine-tune", 48, 1024, "cpu"),
    ("gpt2", "generation", 8, 1024, "gpu"),
)


def _fit_answers() -> dict[tuple, dict]:
    """`fit --format json` once per (model, budget, length, target), each set-up's answer by its point."""
    groups = defaultdict(list)
    for model, kind, gib, seq, target in POINTS:
        groups[(model, gib, seq, target)].append(kind)
    answers = {}
    for (model, gib, seq, target), kinds in groups.items():
        result = run_cli("fit", "--model", model, "--budget", f"{gib}GiB", "--seq", str(seq), "--target", target,
                         "--format", "json", timeout=1200)
        assert result.returncode == 0, result.stderr
        by_kind = {found["kind"]: found for found in json.loads(result.stdout)}
        answers.update({(model, kind, gib, seq, target): by_kind[kind] for kind in kinds})
    return answers


def _page_answer(page, model: str, kind: str, gib: float, seq: int, target: str) -> dict:
    """The calculator's answer for one point, chosen as a reader chooses it, the budget typed."""
    page.select_option("#calc-model", model)
    page.select_option("#calc-seq", str(seq))
    page.select_option("#calc-kind", kind)
    page.select_option("#calc-target", target)
    page.fill("#calc-typed", str(gib))
    shown = page.locator("#calc-answer")
    return {name: shown.get_attribute(f"data-{name}") for name in ("batch", "bytes", "usable", "budget", "text")}


def test_the_calculator_and_fit_give_one_answer_at_20_points(browser, server: str) -> None:  # noqa: F811
    from generator.answers.fit import FitAnswer
    from generator.report.fit_first import cell

    fitted = _fit_answers()
    page, _ = _open(browser, f"{server}/fit.html", 390)
    calculator = json.loads(page.text_content("#calculator-data"))
    answered, deferred = [], []
    for point in POINTS:
        model, kind, _, seq, _ = point
        shown, found = _page_answer(page, *point), fitted[point]
        assert int(shown["budget"]) == found["budget_bytes"] == round(point[2] * 2**30), point
        if "beyond the simulated curve" in shown["text"]:
            (curve,) = [c for c in calculator["curves"] if (c["model"], c["kind"], c["seq"]) == (model, kind, seq)]
            assert shown["batch"] == "0" and found["read_from"] == "", point  # fit simulated past the curve
            assert found["batch"] >= int(curve["batches"][-1]), point
            deferred.append(point)
            continue
        assert [int(shown[name]) for name in ("batch", "bytes", "usable")] == [
            found["batch"], found["predicted_bytes"], found["usable_bytes"]], point
        assert shown["text"] == cell(FitAnswer(**{name: found[name] for name in FitAnswer.__dataclass_fields__}))
        assert (MEASUREMENTS / found["read_from"]).is_file(), point  # read from the curve the page reads
        answered.append(point)
    page.close()
    budgets = {gib for _, _, gib, _, _ in answered + deferred}
    assert len(answered) >= 14 and deferred and {120, 1000} <= budgets
    assert {target for *_, target in answered} == {"cpu", "gpu"}
