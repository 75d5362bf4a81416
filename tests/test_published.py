"""The published-figures suite (measurements/_published/): every entry simulated again and held to its band and
to the answers the site shows; the loader's refusals; QLoRA's allowance; the bnb042 program; the page."""

import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TINY_MODEL, run_cli

from generator.answers.published import Judged, kind, qlora_allowance
from generator.matrix import RowError, parse_row
from generator.model_source import resolve_model
from generator.predict.published import simulate_suite
from generator.predict.simulate import simulate_part
from generator.quantize import import_bitsandbytes, matmul_4bit_program
from generator.report.site import build_pages
from generator.store import published
from generator.store.records import ResultsError

pytestmark = pytest.mark.slow  # simulates every published entry's 7B-class recipe

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "measurements"


@pytest.fixture(scope="module")
def fresh() -> published.PredictedFile:
    """Every entry simulated now, two at a time."""
    return simulate_suite(published.load_suite(MEASUREMENTS), workers=2)


def test_every_entry_simulates_to_the_answer_the_site_shows(fresh: published.PredictedFile) -> None:
    recorded = published.load_predicted(MEASUREMENTS)
    assert recorded is not None, "run `memory-budget published --record`"
    assert [e.error for e in fresh.entries] == [""] * len(fresh.entries)
    assert recorded.entries == fresh.entries, "the committed answers are stale: `memory-budget published --record`"
    assert (recorded.libraries, recorded.simulator) == (fresh.libraries, fresh.simulator)


def test_every_entry_keeps_the_verdict_the_suite_states(fresh: published.PredictedFile) -> None:
    """An entry outside its band (-5 % / +10 % unless it says why) fails, unless the suite says it is outside and
    why its source's program differs; one that moves into its band fails too, so the page's claim is updated."""
    entries = published.load_suite(MEASUREMENTS)
    from generator.answers.published import judge

    for judged in judge(entries, fresh):
        verdict = "within" if judged.within else "outside"
        assert verdict == judged.entry.expected, (judged.entry.id, judged.error)
        if verdict == "outside":
            assert judged.entry.differs, judged.entry.id


def test_no_qlora_entry_is_under_its_figure_with_the_allowance(fresh: published.PredictedFile) -> None:
    entries = published.load_suite(MEASUREMENTS)
    from generator.answers.published import judge

    judged = judge(entries, fresh)
    allowance = qlora_allowance(judged)
    assert allowance is not None and allowance.factor > 1
    for j in judged:
        if j.kind == "qlora":
            assert j.predicted.gpu_tensor_peak_bytes * allowance.factor >= j.entry.published_bytes * (1 - 1e-9)


def _judged(name: str, error: float, row: str = "train-b1-s64-bf16-nf4-lora8") -> Judged:
    entry = replace(published.load_suite(MEASUREMENTS)[0], id=name, row=row)
    return Judged(entry=entry, kind=kind(entry), predicted=None, error=error)


def test_the_allowance_is_the_largest_shortfall_and_is_judged_leave_one_out() -> None:
    allowance = qlora_allowance([_judged("a", -0.20), _judged("b", -0.10), _judged("c", 0.05),
                                 _judged("plain", -0.5, row="train-b1-s64-bf16-lora8")])
    assert allowance is not None
    assert allowance.factor == pytest.approx(1 / 0.8) and allowance.worst == "a" and allowance.entries == 3
    assert [name for name, _ in allowance.held_out_under] == ["a"]
    assert allowance.held_out_under[0][1] == pytest.approx((1 / 0.9) / (1 / 0.8) - 1)
    assert qlora_allowance([_judged("a", -0.2)]) is None


def _suite(tmp_path: Path) -> Path:
    shutil.copytree(MEASUREMENTS / published.FOLDER, tmp_path / published.FOLDER)
    return tmp_path / published.FOLDER / "litgpt-finetune.toml"


@pytest.mark.parametrize(("old", "new", "says"), [
    ('unit = "GB"', 'unit = "MB"', "unit 'MB'"),
    ('unit_bytes = 1000000000', 'unit_bytes = 1073741824', "unit 'GB' with unit_bytes 1073741824"),
    ('published = "19.77"', 'published = "-1"', "must be a positive number"),
    ('published = "19.77"', 'published = "lots"', "is not a number"),
    ('config = "configs/falcon-7b.json"', 'config = "../../pyproject.toml"', "is not a file inside"),
    ('url = "https://github.com', 'url = "javascript:alert(1)//github.com', "must be an https address"),
    ('id = "gemma-2b-lora"', 'id = "falcon-7b-lora"', "entry ids repeat"),
    ('format = 1', 'format = 9', "format 9"),
])
def test_a_bad_suite_file_is_refused_in_one_line(tmp_path: Path, old: str, new: str, says: str) -> None:
    path = _suite(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert old in text
    path.write_text(text.replace(old, new, 1), encoding="utf-8")
    with pytest.raises(ResultsError, match=re.escape(says)):
        published.load_suite(tmp_path)
    result = run_cli("build", "--measurements", str(tmp_path), "--output", str(tmp_path / "site"))
    assert result.returncode == 2 and "Traceback" not in result.stderr


def test_a_prediction_of_another_config_is_stale_and_not_shown(tmp_path: Path) -> None:
    path = _suite(tmp_path)
    config = path.parent / "configs" / "phi-2.json"
    config.write_text(config.read_text(encoding="utf-8").replace('"num_hidden_layers": 32', '"num_hidden_layers": 2'),
                      encoding="utf-8")
    entries = published.load_suite(tmp_path)
    from generator.answers.published import judge

    judged = {j.entry.id: j for j in judge(entries, published.load_predicted(tmp_path))}
    assert judged["phi-2-lora"].predicted is None and judged["llama-2-7b-lora"].predicted is not None


def test_the_page_is_built_linked_and_names_every_source() -> None:
    pages = build_pages(MEASUREMENTS)
    page = pages["published.md"]
    for entry in published.load_suite(MEASUREMENTS):
        assert entry.id.replace("_", "\\_") in page
    assert "`https://github.com/Lightning-AI/litgpt/blob/5895df1004c3d05ef69f7aeffcfee757dbc42d58" in page
    assert "published.svg" in page and "published.svg" in pages
    gpu_section = pages["index.md"].split("## Reading these figures for a GPU")[1].split("\n## ")[0]
    assert "(published.md)" in gpu_section
    assert "(published.md)" in pages["fit.md"].split("\n## ")[0]
    assert 'href="published.html"' in pages["fit.html"]


def test_bnb042_names_a_4bit_rows_matmul_and_round_trips() -> None:
    row = parse_row("train-b2-s512-bf16-nf4-bnb042-lora32")
    assert row.bitsandbytes == "0.42" and row.id == "train-b2-s512-bf16-nf4-bnb042-lora32"
    assert parse_row("train-b2-s512-bf16-nf4-lora32").bitsandbytes == ""
    with pytest.raises(RowError, match="add nf4"):
        from generator.matrix import check_row

        check_row(parse_row("train-b2-bf16-bnb042-lora8"))


def test_bitsandbytes_0_42s_matmul_keeps_the_input_and_the_installed_one_does_not() -> None:
    """On real tensors: the older program's node holds its input A until the graph goes; the installed one's
    holds None, as bitsandbytes#1270 made it. The gradient is the same."""
    import torch

    bnb = import_bitsandbytes()
    packed, state = bnb.functional.quantize_4bit(torch.randn(32, 64, dtype=torch.bfloat16), blocksize=64,
                                                 quant_type="nf4")
    layer = bnb.nn.Linear4bit(64, 32, bias=False, compute_dtype=torch.bfloat16, quant_type="nf4", device="meta")
    layer.weight = bnb.nn.Params4bit(packed, requires_grad=False, quant_state=state, blocksize=64,
                                     quant_type="nf4", module=layer, bnb_quantized=True)
    layer.quant_state = state
    gradients = []
    for program in ("", "0.42"):
        x = torch.randn(4, 64, dtype=torch.bfloat16, requires_grad=True)
        with matmul_4bit_program(replace(parse_row("train-b1-s4-bf16-nf4-lora8"), bitsandbytes=program)):
            out = layer(x)
        kept = out.grad_fn.tensors[0]
        assert (kept is x) == (program == "0.42")
        out.float().sum().backward()
        gradients.append(x.grad)
    assert torch.equal(gradients[0], gradients[1])


def test_the_older_matmul_keeps_more_in_a_simulated_qlora_step() -> None:
    source = resolve_model(str(TINY_MODEL))
    plain = simulate_part(parse_row("train-b2-s64-bf16-nf4-lora8"), source, "cuda")
    older = simulate_part(parse_row("train-b2-s64-bf16-nf4-bnb042-lora8"), source, "cuda")
    assert older.cuda_tensor_peak_bytes > plain.cuda_tensor_peak_bytes


def test_falcons_linear_subclass_is_quantized() -> None:
    part = simulate_part(parse_row("train-b1-s16-bf16-nf4-lora8"),
                         replace(resolve_model(str(ROOT / "tests" / "architectures" / "falcon.json")),
                                 lora_targets=("query_key_value",)), "cpu")
    assert part.quantization_bytes > 0


def test_key_value_heads_that_do_not_divide_the_heads_are_refused_in_one_line(tmp_path: Path) -> None:
    import json

    config = json.loads(TINY_MODEL.read_text(encoding="utf-8"))
    config["num_attention_heads"], config["num_key_value_heads"] = 4, 3
    path = tmp_path / "odd-heads.json"
    path.write_text(json.dumps(config), encoding="utf-8")
    result = run_cli("predict", "--model", str(path), "--rows", "train-b1-s8")
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1 and "num_key_value_heads is 3" in result.stderr
    assert "must be one of 1, 2, 4" in result.stderr


def test_the_command_line_says_its_version() -> None:
    result = run_cli("--version")
    assert result.returncode == 0 and result.stdout.startswith("memory-budget ")
