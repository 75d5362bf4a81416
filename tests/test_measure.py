"""measure -> TOML, with real worker processes on the tiny config."""

import tomllib
from pathlib import Path

import pytest
from conftest import TINY_MODEL, run_cli

from generator.matrix import DEFAULT_ROWS, default_matrix
from generator.store.codec import load_file
from generator.store.records import METHOD_VERSION, SCHEMA_VERSION

pytestmark = pytest.mark.slow  # measures real worker processes

# LoRA r=8 on q_proj and v_proj of the tiny config: per layer r*(64+64) for q and r*(64+32) for v.
TINY_LORA_TRAINABLE = 2 * (8 * (64 + 64) + 8 * (64 + 32))


def test_one_file_per_row_named_by_its_coordinates(measured_folder: Path) -> None:
    names = sorted(path.name for path in measured_folder.glob("*.toml") if not path.name.startswith("_"))
    assert names == sorted(f"{row.id}.toml" for row in default_matrix())
    assert len(names) == len(DEFAULT_ROWS)


def test_every_row_is_ok_with_integer_bytes_and_metadata(measured_folder: Path) -> None:
    for row in default_matrix():
        path = measured_folder / f"{row.id}.toml"
        document = tomllib.loads(path.read_text())
        assert document["schema_version"] == SCHEMA_VERSION
        assert document["environment"]["id"] == measured_folder.parent.name
        assert document["method_version"] == METHOD_VERSION and measured_folder.name == document["model"]["name"]
        assert {"python", "torch", "transformers", "peft", "cpu", "os", "total_memory_bytes"} <= set(
            document["environment"])
        result = load_file(path)
        assert result.summary.status == "ok", (row.id, result.summary)
        assert isinstance(result.summary.peak_rss_bytes, int) and result.summary.peak_rss_bytes > 0
        if row.mode != "baseline":
            assert result.summary.net_peak_bytes > 0
            assert result.summary.net_peak_bytes == result.summary.peak_rss_bytes - result.summary.baseline_bytes


def test_training_rows_record_every_phase_and_both_steps(measured_folder: Path) -> None:
    result = load_file(measured_folder / "train-b8-s256.toml")
    assert list(result.summary.phase_peak_bytes) == ["backward", "forward", "load", "optimizer", "step2"]
    (repeat,) = result.repeats
    assert len(repeat.step_seconds) == 2
    assert repeat.startup_seconds > 0 and repeat.load_seconds > 0


def test_lora_trains_only_the_adapter(measured_folder: Path) -> None:
    lora = load_file(measured_folder / "train-b8-s256-lora8.toml").model
    full = load_file(measured_folder / "train-b8-s256.toml").model
    assert lora.trainable_parameters == TINY_LORA_TRAINABLE
    assert lora.parameters == full.parameters + TINY_LORA_TRAINABLE


def test_training_needs_more_than_inference(measured_folder: Path) -> None:
    train = load_file(measured_folder / "train-b8-s256.toml").summary.net_peak_bytes
    infer = load_file(measured_folder / "infer-b8-s256.toml").summary.net_peak_bytes
    assert train > infer


def test_matrix_run_records_its_own_timing(measured_folder: Path) -> None:
    (benchmark,) = tomllib.loads((measured_folder / "_runs.toml").read_text())["runs"]
    assert benchmark["server_start_seconds"] > 0
    assert set(benchmark["rows"]) == {row.id for row in default_matrix()}
    assert 0 <= benchmark["rows"]["train-b8-s256"]["setup_share"] < 1


def test_rerun_skips_present_rows_and_force_redoes_them(measurements_copy: Path) -> None:
    path = next(measurements_copy.glob("*/*/train-b1-s256.toml"))
    before = path.read_bytes()
    again = run_cli("measure", "--model", str(TINY_MODEL), "--repeats", "1", "--rows", "train-b1",
                    "--output", str(measurements_copy))
    assert again.returncode == 0, again.stderr
    assert "0 row(s) measured" in again.stderr and "1 already present" in again.stderr
    assert path.read_bytes() == before
    forced = run_cli("measure", "--model", str(TINY_MODEL), "--repeats", "2", "--rows", "train-b1", "--force",
                     "--output", str(measurements_copy))
    assert forced.returncode == 0, forced.stderr
    result = load_file(path)
    assert len(result.repeats) == 2
    runs = tomllib.loads(next(measurements_copy.glob("*/*/_runs.toml")).read_text())["runs"]
    assert [list(run["rows"]) for run in runs] == [[row.id for row in default_matrix()], ["train-b1-s256"]]
    assert result.summary.net_peak_bytes in range(
        min(r.net_peak_bytes for r in result.repeats), max(r.net_peak_bytes for r in result.repeats) + 1)


def test_measure_does_not_import_the_site_stack() -> None:
    """`nox -s measure` installs no charting or templating packages, so measure must not import them."""
    import subprocess
    import sys

    code = ("import sys; from generator.cli import main; main(['measure', '--rows', 'nonsense']); "
            "print(sorted(m for m in ('altair', 'jinja2', 'markdown_it', 'vl_convert') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "[]"
