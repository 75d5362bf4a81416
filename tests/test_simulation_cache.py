"""Simulations kept on disk (generator/store/simulations.py), a program's part to a file: what comes back equals
the simulation to the byte, a key that differs in anything the figures depend on is simulated afresh, a damaged
file is no answer, and a question about one target simulates one program."""

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TINY_MODEL

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict import simulate as simulation
from generator.predict.fast import kept as fast
from generator.store import simulations


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("MEMORY_BUDGET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The row ids simulated, once for each program's part."""
    made: list[str] = []
    real = simulation.simulate_part
    monkeypatch.setattr(simulation, "simulate_part", lambda row, source, program, expandable=True: made.append(row.id)
                        or real(row, source, program, expandable))
    return made


def test_a_kept_simulation_equals_the_simulation_to_the_byte(monkeypatch, kept: Path) -> None:
    made = _counting(monkeypatch)
    source, row = resolve_model(str(TINY_MODEL)), parse_row("train-b2-s32")
    first = simulation.simulate_kept(row, source)
    again = simulation.simulate_kept(row, source)
    assert made == ["train-b2-s32"] * 2  # a part for each program; the second time both came from disk
    assert again == first and again.cuda_reserved_bytes > 0 and again.phase_peak_bytes == first.phase_peak_bytes
    assert replace(first, seconds=0.0) == replace(simulation.simulate(row, source), seconds=0.0)
    assert sorted(path.name for path in kept.rglob("*.toml")) == ["train-b2-s32-default-cpu.toml",
                                                                 "train-b2-s32-default-cuda.toml"]


def test_anything_the_figures_depend_on_makes_another_key(monkeypatch, kept: Path) -> None:
    made = _counting(monkeypatch)
    source, row = resolve_model(str(TINY_MODEL)), parse_row("train-b2-s32-lora8")
    simulation.simulate_kept(row, source)
    simulation.simulate_kept(parse_row("train-b3-s32-lora8"), source)  # another row
    simulation.simulate_kept(row, replace(source, lora_targets=("q_proj",)))  # other LoRA targets
    simulation.simulate_kept(row, replace(source, config_sha256="0" * 64))  # another config
    monkeypatch.setattr(fast, "SIMULATOR_MODULES", ("generator.steps",))  # other simulator code
    simulation.simulate_kept(row, source)
    assert len(made) == 5 * 2


def test_a_damaged_or_foreign_file_is_simulated_again(monkeypatch, kept: Path) -> None:
    made = _counting(monkeypatch)
    source, row = resolve_model(str(TINY_MODEL)), parse_row("infer-b2-s32")
    first = simulation.simulate_kept(row, source)
    (path,) = kept.rglob("*-cpu.toml")
    path.write_text("part = [", encoding="utf-8")
    assert replace(simulation.simulate_kept(row, source), seconds=0.0) == replace(first, seconds=0.0)
    path.write_text(path.read_text(encoding="utf-8").replace("infer-b2-s32", "infer-b9-s32"), encoding="utf-8")
    assert replace(simulation.simulate_kept(row, source), seconds=0.0) == replace(first, seconds=0.0)
    assert made == ["infer-b2-s32"] * 4  # both parts, then the damaged part twice


def test_off_keeps_nothing(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMORY_BUDGET_CACHE", "off")
    assert simulations.cache_root() is None
    monkeypatch.delenv("MEMORY_BUDGET_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert simulations.cache_root() == tmp_path / "memory-budget"


def test_with_nothing_kept_no_key_is_made(monkeypatch: pytest.MonkeyPatch) -> None:
    """MEMORY_BUDGET_CACHE=off: each part is simulated, and no key made (the code's hash reads every module)."""
    monkeypatch.setenv("MEMORY_BUDGET_CACHE", "off")
    for module in (simulation, fast):
        monkeypatch.setattr(module, "simulation_key", lambda *_: pytest.fail("a key made with nothing kept"))
    source, row = resolve_model(str(TINY_MODEL)), parse_row("infer-b2-s32")
    assert replace(simulation.simulate_kept(row, source), seconds=0.0) == replace(simulation.simulate(row, source),
                                                                                  seconds=0.0)


def test_a_question_about_one_target_simulates_its_program_only(monkeypatch, kept: Path) -> None:
    """fit --target gpu reads CUDA's part, --target cpu the CPU's: each equals that part of the whole simulation,
    and a whole prediction asked later simulates only the parts not yet kept whole (fit --target gpu keeps CUDA's
    without the expandable reserve it does not read; a question that reads it simulates CUDA's again, whole)."""
    from generator.budget import ProcessModel
    from generator.predict.fit import Predictor

    made = _counting(monkeypatch)
    source, row = resolve_model(str(TINY_MODEL)), parse_row("train-b2-s32")
    model = ProcessModel(0.0, 0.0, 0, "")
    gpu, cpu = Predictor(source, model, target="gpu"), Predictor(source, model, target="cpu")
    whole = simulation.simulate(row, source)
    made.clear()
    assert gpu.peak(row.id) == whole.cuda_reserved_bytes + CUDA_CONTEXT_BYTES
    assert made == [row.id] and [path.name for path in kept.rglob("*.toml")] == ["train-b2-s32-default-cuda.toml"]
    (kept_cuda,) = kept.rglob("*-cuda.toml")
    assert "cuda_expandable_bytes" not in kept_cuda.read_text(encoding="utf-8")  # not replayed, so not kept
    assert cpu.peak(row.id) == model.expected(whole.tensor_peak_bytes)
    assert len(made) == 2
    assert replace(simulation.simulate_kept(row, source), seconds=0.0) == replace(whole, seconds=0.0)
    assert made == [row.id] * 3  # CUDA's part again, for the expandable reserve; the CPU's was kept
    expandable = Predictor(source, model, target="gpu-expandable")
    assert expandable.peak(row.id) == whole.cuda_expandable_bytes + CUDA_CONTEXT_BYTES
    assert gpu.fresh().peak(row.id) == whole.cuda_reserved_bytes + CUDA_CONTEXT_BYTES
    assert len(made) == 3  # the whole part, kept, serves every target


def test_the_two_parts_hold_every_field_of_a_prediction_and_share_only_the_counts() -> None:
    """A field added to Prediction and to neither part would be joined as its default: the parts name them all."""
    from dataclasses import fields

    from generator.store.records import CpuPart, CudaPart, Prediction

    cpu, cuda = ({spec.name for spec in fields(part)} for part in (CpuPart, CudaPart))
    assert cpu | cuda == {spec.name for spec in fields(Prediction)}
    assert cpu & cuda == {"parameters", "trainable_parameters", "method", "seconds", "lora_targets",
                          "quantization_bytes"}


def test_a_key_names_the_versions_the_libraries_report() -> None:
    """The key reads each library's version from its metadata (no import): the same text its __version__ gives,
    so a kept simulation is filed as before, and bitsandbytes' only for a row that uses it."""
    import bitsandbytes
    import peft
    import torch
    import transformers

    source = resolve_model(str(TINY_MODEL))
    versions = f"torch {torch.__version__}, transformers {transformers.__version__}, peft {peft.__version__}"
    assert fast.simulation_key(parse_row("train-b2-s32"), source, "cpu").libraries == versions
    assert fast.simulation_key(parse_row("train-b2-s32-bf16-nf4-lora8"), source, "cuda").libraries == (
        f"{versions}, bitsandbytes {bitsandbytes.__version__}")


def _predict(monkeypatch: pytest.MonkeyPatch, arguments: list[str]) -> str:
    import io
    import sys

    from generator.cli import main

    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "argv", ["memory-budget", "predict", "--model", str(TINY_MODEL), *arguments])
    assert main() == 0
    return out.getvalue()


@pytest.mark.parametrize("output", ["text", "json"])
def test_the_fast_path_prints_what_the_reference_path_prints_to_the_byte(monkeypatch, kept: Path,
                                                                          output: str) -> None:
    """predict of rows kept whole reads them without simulating (kept.py); what it prints equals what the
    reference path, which imports the simulator and reads the same kept parts, prints."""
    from generator.predict import rows

    arguments = ["--rows", "train-b2-s32,infer-b3-s32", "--jobs", "1", "--format", output]
    _predict(monkeypatch, arguments)  # simulates and keeps both rows' parts
    made = _counting(monkeypatch)
    fast_path = _predict(monkeypatch, arguments)
    monkeypatch.setattr(rows, "kept_predictions", lambda *_: None)  # the reference path, reading the same parts
    assert _predict(monkeypatch, arguments) == fast_path and made == []


def test_a_row_not_kept_sends_the_question_to_the_reference_path(monkeypatch, kept: Path) -> None:
    source = resolve_model(str(TINY_MODEL))
    simulation.simulate_kept(parse_row("infer-b2-s32"), source)
    assert fast.kept_predictions([parse_row("infer-b2-s32")], source) is not None
    assert fast.kept_predictions([parse_row("infer-b2-s32"), parse_row("infer-b3-s32")], source) is None


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_predict_of_kept_rows_imports_neither_torch_nor_transformers(kept: Path) -> None:
    """The speed of `predict` asked again is its imports: with every part kept and the config's checks kept,
    neither heavy library is imported (the figure itself is in the benchmarks, not here)."""
    import os
    import subprocess
    import sys

    command = ["predict", "--model", str(TINY_MODEL), "--rows", "infer-b2-s32", "--jobs", "1"]
    probe = ("import sys; from generator.cli import main; sys.argv = ['memory-budget', *sys.argv[1:]]; code = main(); "
             "print(sorted({'torch', 'transformers', 'peft'} & set(sys.modules))); raise SystemExit(code)")
    environment = {**os.environ, "MEMORY_BUDGET_CACHE": str(kept)}
    for _ in range(2):  # the first run simulates and keeps; the second reads
        done = subprocess.run([sys.executable, "-c", probe, *command], env=environment, capture_output=True,
                              text=True, check=True)
    assert done.stdout.splitlines()[-1] == "[]", done.stdout


def test_a_config_that_passed_its_checks_is_not_checked_again_and_one_that_failed_always_is(
        monkeypatch, kept: Path, tmp_path: Path) -> None:
    import json

    from generator.model_source import ModelError, check_causal_lm

    checked: list[str] = []
    monkeypatch.setattr(fast, "check_causal_lm", lambda config, where: checked.append(where)
                        or check_causal_lm(config, where))
    first = resolve_model(str(TINY_MODEL), fast.kept_check)
    assert resolve_model(str(TINY_MODEL), fast.kept_check) == first == resolve_model(str(TINY_MODEL))
    assert checked == [str(TINY_MODEL)]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**json.loads(TINY_MODEL.read_text()), "model_type": "bert"}), encoding="utf-8")
    for _ in range(2):
        with pytest.raises(ModelError, match="is an encoder"):
            resolve_model(str(bad), fast.kept_check)
    assert checked == [str(TINY_MODEL), str(bad), str(bad)]
