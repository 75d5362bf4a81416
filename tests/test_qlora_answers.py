"""QLoRA's allowance in the answers (generator/answers/published.py): the published suite sets it, every GPU
answer for a 4-bit row carries it on its simulated reserve (fit, predict, the fit page and its calculator, one
rule: answers/fit.py needs), no other row's answer moves, and every QLoRA answer states its bitsandbytes."""

from importlib import metadata
from pathlib import Path

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.answers.fit import FitAnswer, needs
from generator.answers.published import PPM, allowed, judge, qlora_ppm, row_ppm, suite_allowance
from generator.budget import ProcessModel
from generator.matrix import parse_row
from generator.predict.fit import Predictor
from generator.predict.fit_report import render_json, render_text
from generator.report.fit_page import site_answers, site_budgets
from generator.store import published
from generator.store.fit_table import load_fit
from generator.store.records import CpuPart, CudaPart

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "measurements"
NO_PROCESS = ProcessModel(0.0, 0.0, 0, "")


def test_the_allowance_is_a_whole_ppm_never_below_its_factor_and_rounds_each_figure_up() -> None:
    found = suite_allowance(MEASUREMENTS)
    assert found is not None and found.ppm >= found.factor * PPM > found.ppm - 1
    assert allowed(1_000_000, 1_235_237) == 1_235_237 and allowed(3, 1_500_000) == 5  # 4.5 rounds up
    assert allowed(7, PPM) == 7


def test_no_qlora_answer_is_under_a_published_qlora_peak() -> None:
    """What a GPU answer holds for a QLoRA entry's row (its simulated reserve with the allowance, the context
    on top) is at least the peak the source published, for every QLoRA entry of the suite."""
    ppm = qlora_ppm(MEASUREMENTS, "gpu")
    judged = [j for j in judge(published.load_suite(MEASUREMENTS), published.load_predicted(MEASUREMENTS))
              if j.kind == "qlora"]
    assert len(judged) >= 2 and all(j.predicted is not None for j in judged)
    for j in judged:
        assert j.predicted is not None
        assert row_ppm(j.entry.row, ppm) == ppm > PPM
        assert allowed(j.predicted.gpu_tensor_peak_bytes, ppm) >= j.entry.published_bytes, j.entry.id
        assert needs("gpu", 0, j.predicted.gpu_reserved_bytes, NO_PROCESS, ppm) >= j.entry.published_bytes


def test_a_folder_without_a_suite_reads_the_one_shipped_with_the_tool(tmp_path: Path) -> None:
    assert qlora_ppm(tmp_path, "gpu") == qlora_ppm(MEASUREMENTS, "gpu") > PPM
    assert qlora_ppm(MEASUREMENTS, "cpu") == PPM  # a CPU's QLoRA is measured exact: no allowance


def _simulator(row, source) -> CudaPart | CpuPart:  # one part for every row: reserve 1 GiB, tensors 0.9 GiB
    counts = {"parameters": 10, "trainable_parameters": 1, "method": "stub", "seconds": 0.0, "lora_targets": "",
              "quantization_bytes": 0}
    return CudaPart(cuda_tensor_peak_bytes=900 << 20, cuda_phase="step1", cuda_reserved_bytes=1 << 30,
                    cuda_expandable_bytes=1 << 30, **counts)


def test_a_predictor_puts_the_allowance_on_4bit_rows_on_a_gpu_only() -> None:
    gpu = Predictor(None, NO_PROCESS, _simulator, target="gpu", qlora_ppm=1_250_000)  # type: ignore[arg-type]
    assert gpu.peak("train-b2-s64-bf16-nf4-lora8") == (5 << 28) + CUDA_CONTEXT_BYTES
    assert gpu.peak("train-b2-s64-bf16-lora8") == (1 << 30) + CUDA_CONTEXT_BYTES
    assert gpu.fresh().qlora_ppm == 1_250_000
    cpu = Predictor(None, NO_PROCESS, _simulator, target="cpu", qlora_ppm=1_250_000)  # type: ignore[arg-type]
    assert cpu.allowance(parse_row("train-b2-s64-bf16-nf4-lora8")) == PPM


def _answer(kind: str, ppm: int = PPM) -> FitAnswer:
    return FitAnswer(kind=kind, row="train-b2-s256-bf16-nf4-lora8", batch=2, predicted_bytes=1 << 30,
                     next_bytes=2 << 30, usable_bytes=3 << 30, simulations=3, allowance_ppm=ppm)


def test_fits_report_states_the_allowance_and_the_bitsandbytes_of_every_qlora_answer() -> None:
    version = metadata.version("bitsandbytes")
    text = render_text([_answer("QLoRA", 1_235_237)], "m", 4 << 30, 0.1, NO_PROCESS, "gpu")
    assert f"; bitsandbytes {version})" in text and "QLoRA: the simulated reserve x1.235" in text
    bare = render_text([_answer("QLoRA")], "m", 4 << 30, 0.1, NO_PROCESS, "gpu")
    assert "no published-figures suite was found" in bare
    assert "allowance" not in render_text([_answer("QLoRA")], "m", 4 << 30, 0.1, NO_PROCESS, "cpu")
    assert f'"library": "bitsandbytes {version}"' in render_json([_answer("QLoRA")], "m", 1, 0.1, NO_PROCESS)


def test_the_fit_page_moves_qlora_answers_only() -> None:
    """The page's answers with the allowance against the same curves without it: only 4-bit set-ups change,
    and none to a larger batch."""
    (table,) = [load_fit(path.parent) for path in MEASUREMENTS.glob("*/_fit.toml")]
    assert table is not None
    budgets = tuple(b for b in site_budgets(0.1) if b.target == "gpu")
    with_allowance = site_answers(table, NO_PROCESS, budgets, qlora_ppm(MEASUREMENTS, "gpu"))
    without = site_answers(table, NO_PROCESS, budgets)
    moved = 0
    for (_, one), (_, other) in zip(with_allowance, without, strict=True):
        if row_ppm(one.row, 2 * PPM) == PPM:
            assert one == other
        else:
            assert one.batch <= other.batch
            moved += one.batch < other.batch
    assert moved > 0
