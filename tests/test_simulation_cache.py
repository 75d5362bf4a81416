"""Simulations kept on disk (generator/store/simulations.py): what comes back equals the simulation to the byte,
a key that differs in anything the figures depend on is simulated afresh, and a damaged file is no answer."""

from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TINY_MODEL

from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict import simulate as simulation
from generator.store import simulations


@pytest.fixture
def kept(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setenv("MEMORY_BUDGET_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    made: list[str] = []
    real = simulation.simulate
    monkeypatch.setattr(simulation, "simulate", lambda row, source: made.append(row.id) or real(row, source))
    return made


def test_a_kept_simulation_equals_the_simulation_to_the_byte(monkeypatch, kept: Path) -> None:
    made = _counting(monkeypatch)
    source, row = resolve_model(str(TINY_MODEL)), parse_row("train-b2-s32")
    first = simulation.simulate_kept(row, source)
    again = simulation.simulate_kept(row, source)
    assert made == ["train-b2-s32"]  # the second came from disk
    assert again == first and again.cuda_reserved_bytes > 0 and again.phase_peak_bytes == first.phase_peak_bytes
    assert len(list(kept.rglob("*.toml"))) == 1


def test_anything_the_figures_depend_on_makes_another_key(monkeypatch, kept: Path) -> None:
    made = _counting(monkeypatch)
    source, row = resolve_model(str(TINY_MODEL)), parse_row("train-b2-s32-lora8")
    simulation.simulate_kept(row, source)
    simulation.simulate_kept(parse_row("train-b3-s32-lora8"), source)  # another row
    simulation.simulate_kept(row, replace(source, lora_targets=("q_proj",)))  # other LoRA targets
    simulation.simulate_kept(row, replace(source, config_sha256="0" * 64))  # another config
    monkeypatch.setattr(simulation, "SIMULATOR_MODULES", ("generator.steps",))  # other simulator code
    simulation.simulate_kept(row, source)
    assert len(made) == 5


def test_a_damaged_or_foreign_file_is_simulated_again(monkeypatch, kept: Path) -> None:
    made = _counting(monkeypatch)
    source, row = resolve_model(str(TINY_MODEL)), parse_row("infer-b2-s32")
    first = simulation.simulate_kept(row, source)
    (path,) = kept.rglob("*.toml")
    path.write_text("prediction = [", encoding="utf-8")
    assert replace(simulation.simulate_kept(row, source), seconds=0.0) == replace(first, seconds=0.0)
    path.write_text(path.read_text(encoding="utf-8").replace("infer-b2-s32", "infer-b9-s32"), encoding="utf-8")
    assert replace(simulation.simulate_kept(row, source), seconds=0.0) == replace(first, seconds=0.0)
    assert made == ["infer-b2-s32"] * 3


def test_off_keeps_nothing(monkeypatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMORY_BUDGET_CACHE", "off")
    assert simulations.cache_root() is None
    monkeypatch.delenv("MEMORY_BUDGET_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert simulations.cache_root() == tmp_path / "memory-budget"
