"""Each defect found by trying the tool as a new user and as a hostile tester, with the test that shows it
fixed (issue: reliability). The Ctrl-C defect's test is in test_failures.py."""

import json
import shutil
import tomllib
import warnings
from pathlib import Path

import pytest
import tomli_w
from conftest import TESTS, TINY_MODEL, run_cli

from generator.matrix import RowError, parse_row
from generator.units import MIB

pytestmark = pytest.mark.slow  # simulates configs at scale or starts processes that import torch

ARCHITECTURES = TESTS / "architectures"
ROW_KINDS = ("infer-b2-s32", "train-b2-s32", "train-b2-s32-ckpt", "train-b2-s32-bf16", "train-b2-s32-lora8",
             "train-b2-s32-amp", "train-b2-s32-bf16-lora8", "gen-b2-s32-n4-bf16")


def _one_line_refusal(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    return lines[0]


def _environment(root: Path) -> Path:
    return next(path for path in root.iterdir() if path.is_dir())


@pytest.mark.parametrize("side", ["before", "after"])
def test_a_zero_peak_on_a_finished_row_is_damage_not_a_change(measured_root: Path, tmp_path: Path,
                                                             side: str) -> None:
    """diff used to say '+2,923 MiB | +0.0 % | same' (exit 0) for a zeroed before side."""
    damaged = tmp_path / "damaged"
    shutil.copytree(measured_root, damaged)
    path = next(damaged.glob("*/*/train-b1-s256.toml"))
    document = tomllib.loads(path.read_text())
    for key in ("net_peak_bytes", "net_peak_min_bytes", "net_peak_max_bytes"):
        document["result"][key] = 0
    document["result"]["peak_rss_bytes"] = document["result"]["baseline_bytes"]
    path.write_text(tomli_w.dumps(document))
    sides = [_environment(damaged), _environment(measured_root)]
    if side == "after":
        sides.reverse()
    line = _one_line_refusal(run_cli("diff", *map(str, sides)))
    assert "train-b1-s256.toml" in line and "damaged" in line


def test_a_diff_of_two_models_is_refused(measured_root: Path) -> None:
    committed = max(path for path in (TESTS.parent / "measurements").iterdir()  # a folder of SmolLM2's rows
                    if (path / "SmolLM2-135M-Instruct").is_dir())
    line = _one_line_refusal(run_cli("diff", str(committed), str(_environment(measured_root))))
    assert "SmolLM2-135M-Instruct" in line and "tiny-llama" in line and "--model" in line


@pytest.mark.parametrize(("text", "reason"), [("train-b2-lora0", "LoRA rank must be between 1"),
                                              ("train-b2-bf16-fp16", "names its dtype twice"),
                                              ("train-b2-b4", "names its batch size twice"),
                                              ("infer-b1-s64-s128", "names its sequence length twice")])
def test_a_row_id_never_silently_changes_meaning(text: str, reason: str) -> None:
    with pytest.raises(RowError, match=reason):
        parse_row(text)


def test_an_encoder_config_is_refused_in_every_command(tmp_path: Path) -> None:
    bert = tmp_path / "bert.json"
    bert.write_text(json.dumps({"model_type": "bert", "hidden_size": 64, "num_attention_heads": 4,
                                "num_hidden_layers": 2, "intermediate_size": 128, "vocab_size": 1024}))
    for command in (["measure", "--rows", "infer-b1", "--output", str(tmp_path / "m")],
                    ["predict", "--rows", "infer-b1"], ["fit", "--budget", "1GiB"]):
        line = _one_line_refusal(run_cli(*command, "--model", str(bert)))
        assert "'bert' is an encoder" in line and "is_decoder" in line
    assert not (tmp_path / "m").exists()


@pytest.mark.parametrize("command", [["fit", "--model", "gpt2", "--seq", "4096", "--budget", "24GiB"],
                                     ["predict", "--model", "gpt2", "--rows", "infer-b1-s2048"],
                                     ["measure", "--model", str(TINY_MODEL), "--rows", "train-b1-s1024"],
                                     ["probe", "--model", str(TINY_MODEL), "--row", "train-b1-s600",
                                      "--memory-limit", "1GiB"]])
def test_a_length_over_the_models_positions_is_refused(command: list[str], tmp_path: Path) -> None:
    line = _one_line_refusal(run_cli(*command, *(["--output", str(tmp_path)] if command[0] in ("measure", "probe")
                                                 else [])))
    assert "tokens is longer than its" in line and "positions" in line
    assert not any(tmp_path.iterdir())


def test_every_architecture_simulates_every_row_kind() -> None:
    """Llama, Mistral, Qwen2, Qwen2-MoE, Mixtral, Gemma, Gemma2, Phi, Phi-3, OPT, GPT-2, GPT-NeoX, Falcon and
    Bloom, as tiny configs: fp32 MoE rows used to end in a 170-line traceback (grouped_mm's fake kernel), and
    LoRA rows of Phi-3 and Qwen2-MoE in an uncaught LoraTargetError."""
    from generator.model_source import resolve_model
    from generator.predict.simulate import try_simulate

    failures = {}
    for config in sorted(ARCHITECTURES.glob("*.json")):
        source = resolve_model(str(config))
        for row_id in ROW_KINDS:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                prediction, error = try_simulate(parse_row(row_id), source)
            if prediction is None or prediction.tensor_peak_bytes <= 0:
                failures[f"{config.stem} {row_id}"] = error
    assert len(list(ARCHITECTURES.glob("*.json"))) == 14
    assert failures == {}


def test_an_fp32_moe_simulation_says_how_its_experts_ran() -> None:
    from generator.model_source import resolve_model
    from generator.predict.simulate import simulate

    source = resolve_model(str(ARCHITECTURES / "mixtral.json"))
    assert "grouped_mm fallback" in simulate(parse_row("train-b2-s32"), source).method
    assert "grouped_mm" not in simulate(parse_row("train-b2-s32-bf16"), source).method


def test_one_row_that_cannot_be_simulated_never_hides_the_others() -> None:
    args = ("--model", str(TINY_MODEL), "--lora-targets", "input_layernorm")  # a module peft cannot adapt
    text = run_cli("predict", "--rows", "train-b1-s32", "train-b1-s32-lora8", "infer-b1-s32", *args)
    assert text.returncode == 1 and "Traceback" not in text.stderr
    lines = text.stdout.splitlines()
    assert any(line.startswith("train-b1-s32: ") and "MiB expected" in line for line in lines)
    assert any(line.startswith("infer-b1-s32: ") and "MiB expected" in line for line in lines)
    assert any(line.startswith("train-b1-s32-lora8: not simulated: ") and "not supported" in line for line in lines)
    as_json = json.loads(run_cli("predict", "--rows", "train-b1-s32", "train-b1-s32-lora8", "--format", "json",
                                 *args).stdout)
    assert [bool(row["error"]) for row in as_json] == [False, True] and as_json[0]["tensor_peak_bytes"] > 0
    fit = run_cli("fit", "--budget", "1GiB", "--seq", "32", "--target", "cpu", *args)
    assert fit.returncode == 1
    assert "full training (fp32 weights, gradients and AdamW state, two steps): batch" in fit.stdout
    assert "LoRA (rank-8 adapters on an fp32 base, AdamW on the adapters): not simulated:" in fit.stdout


def test_phi3_gets_lora_targets_and_they_can_be_named() -> None:
    from generator.model_source import resolve_model
    from generator.predict.simulate import simulate

    phi3 = resolve_model(str(ARCHITECTURES / "phi3.json"))
    assert simulate(parse_row("train-b2-s32-lora8"), phi3).lora_targets == "qkv_proj"
    named = run_cli("predict", "--model", str(ARCHITECTURES / "phi3.json"), "--rows", "train-b2-s32-lora8",
                    "--lora-targets", "o_proj,qkv_proj", "--format", "json")
    assert json.loads(named.stdout)[0]["lora_targets"] == "o_proj qkv_proj"


def test_a_control_character_in_a_model_name_never_reaches_the_title(measured_folder: Path) -> None:
    from dataclasses import replace

    from generator.report.article import build_context
    from generator.report.render import render_markdown
    from generator.store.catalog import load_folder

    context = build_context(list(load_folder(measured_folder)))
    html = render_markdown(replace(context, title="\x1b]0;pwned\x07 model"))["index.html"]
    title = html.split("<title>")[1].split("</title>")[0]
    assert "\x1b" not in html and "\x07" not in html and "pwned" in title


def test_the_help_is_complete_and_mistakes_are_explained() -> None:
    measure_help, probe_help = run_cli("measure", "--help").stdout, run_cli("probe", "--help").stdout
    assert "where the worker runs the row" in measure_help
    assert "sequence length of rows" in probe_help and "where the worker runs the row" in probe_help
    assert "Parses arguments into typed" not in run_cli("--help").stdout
    negative = _one_line_refusal(run_cli("fit", "--budget", "-5GiB"))
    assert "--budget=-5GiB" in negative
    assert "above zero" in _one_line_refusal(run_cli("fit", "--budget=-5GiB"))
    assert "shipped: SmolLM2-135M-Instruct, gpt2" in _one_line_refusal(run_cli("predict", "--model", "gpt3"))


def test_a_figure_over_a_limit_never_reads_as_the_limit() -> None:
    from generator.answers.fit import FitAnswer
    from generator.budget import ProcessModel
    from generator.predict.fit_report import render_text
    from generator.units import format_mib_above

    usable = 162 * MIB
    assert format_mib_above(usable + MIB // 3, usable) == "162.3 MiB"
    assert format_mib_above(usable + 1, usable) == f"{usable + 1:,} bytes"
    answer = FitAnswer(kind="full training", row="train-b44-s256", batch=44, predicted_bytes=usable - MIB,
                       next_bytes=usable + MIB // 3, usable_bytes=usable, simulations=3)
    text = render_text([answer], "m", 180 * MIB, 0.1, ProcessModel(0.0, 0.0, 0, "no overhead"))
    assert "batch 45 needs 162.3 MiB" in text and "162 MiB usable" in text


def test_probe_never_says_under_a_cap_beside_a_peak_above_it(measured_folder: Path) -> None:
    from dataclasses import replace

    from generator.measure.probe import describe_outcome
    from generator.store.codec import load_file

    result = load_file(measured_folder / "train-b1-s256.toml")
    capped = replace(result, row=result.row.with_limit(result.summary.peak_rss_bytes - MIB),
                     summary=replace(result.summary, memory_limit_method="RLIMIT_DATA"))
    sentence = describe_outcome(capped)
    assert "above the cap" in sentence and "not the library pages" in sentence


def test_predict_and_fit_print_no_deprecation_warnings() -> None:
    for command in (["predict", "--rows", "train-b1-s32-ckpt", "train-b1-s32-lora8"],
                    ["fit", "--budget", "1GiB", "--seq", "32"]):
        result = run_cli(*command, "--model", str(TINY_MODEL))
        assert result.returncode == 0, result.stderr
        assert "FutureWarning" not in result.stderr and "deprecated" not in result.stderr
