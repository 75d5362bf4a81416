"""The files and names that got through before (issue 56's probes): an absurd simulated figure in a [prediction],
a kept simulation, a curve or a history file is refused naming the file and the field; a second config of the
same name never writes over the first one's recorded curves; a model name made of characters that are made
safe never names a folder the readers skip; fit answers for a GPU unless told otherwise, and says so."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
import tomli_w
from conftest import TINY_MODEL, run_cli
from test_mutation_figures import _row

from generator.store import codec, layout, plausible
from generator.store.fit_table import Curve
from generator.store.history import load_history
from generator.store.recorded_curves import RecordedCurves, recorded_path, save_recorded
from generator.store.records import CudaPart, ResultsError


@pytest.mark.parametrize(("changes", "says"), [
    ({"tensor_peak_bytes": 2**61}, "not a byte count from 0 to 1 EiB"),
    ({"weights_bytes": 10**9}, "is below the sum of its split"),
    ({"phase_peak_bytes": {"step2": 10**10}}, "is below a phase's peak"),
    ({"cuda_tensor_peak_bytes": 100, "cuda_reserved_bytes": 50}, "the caching allocator reserves at least"),
    ({"trainable_parameters": 10**12}, "more than parameters"),
])
def test_an_absurd_prediction_in_a_result_file_is_refused_naming_the_field(tmp_path: Path, changes: dict,
                                                                           says: str) -> None:
    row = _row("train-b2-s256", 40_000_000, prediction=20_000_000)
    assert row.prediction is not None
    folder = tmp_path / "env" / "model"
    path = codec.save(replace(row, prediction=replace(row.prediction, **changes)), folder)
    with pytest.raises(ResultsError, match=says) as refused:
        codec.load_file(path)
    assert str(refused.value).startswith(f"{path}: [prediction] ")


def test_a_kept_simulation_with_an_absurd_figure_is_no_answer(tmp_path: Path) -> None:
    part = CudaPart(cuda_tensor_peak_bytes=900, cuda_phase="step1", cuda_reserved_bytes=100, parameters=1,
                    trainable_parameters=1, method="m")
    with pytest.raises(ResultsError, match="reserves at least the tensors"):
        plausible.check_simulated(part, tmp_path / "kept.toml", "part")


def test_a_history_row_that_is_not_a_whole_byte_count_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "m.toml"
    row = {"row": "train-b8", "tensor_peak_bytes": "9 GB", "weights_bytes": 0, "gradients_bytes": 0,
           "optimizer_bytes": 0, "activations_bytes": 0}
    path.write_text(tomli_w.dumps({"schema_version": 1, "releases": [
        {"transformers": "5.24.0", "torch": "2.13.0", "peft": "0.21.2", "seconds": 1.0, "rows": [row]}]}))
    with pytest.raises(ResultsError, match="tensor_peak_bytes = '9 GB' is not a whole number of bytes"):
        load_history(path)
    row["tensor_peak_bytes"], row["weights_bytes"] = 10, 20
    path.write_text(tomli_w.dumps({"schema_version": 1, "releases": [
        {"transformers": "5.24.0", "torch": "2.13.0", "peft": "0.21.2", "seconds": 1.0, "rows": [row]}]}))
    with pytest.raises(ResultsError, match=r"\[releases.5.24.0.train-b8\] tensor_peak_bytes = 10 is below"):
        load_history(path)


@pytest.mark.parametrize("name", ["\x01", "\x01\x02", "_fit", "..", "a b"])
def test_a_model_name_made_safe_never_names_a_folder_the_readers_skip(name: str) -> None:
    folder = layout.model_folder_name(name)
    assert folder and not folder.startswith(("_", ".")) and "/" not in folder


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_a_second_config_of_the_same_name_never_writes_over_the_firsts_curves(tmp_path: Path) -> None:
    """`fit --model other/config.json --record` where tiny-llama's folder name already holds another config's
    curves: refused in one line, before any simulation, and the first config's file is left as it was."""
    from generator.measure.environment import collect_environment

    other = tmp_path / "tiny-llama"
    other.mkdir()
    config = json.loads(TINY_MODEL.read_text())
    (other / "config.json").write_text(json.dumps({**config, "intermediate_size": 96}))
    folder = tmp_path / "m" / collect_environment().id
    curve = Curve(model="tiny-llama", config_sha256="f" * 64, parameters=1, setup="infer", row="infer-b{b}-s32",
                  batches=(1, 2), tensor_bytes=(1, 2), cuda_bytes=(3, 4))
    first = RecordedCurves(model="tiny-llama", config_sha256="f" * 64, libraries="x", environment="e",
                           simulator="s", curves=(curve,))
    path = save_recorded(first, folder)
    assert path == recorded_path(folder, "tiny-llama")
    before = path.read_bytes()
    result = run_cli("fit", "--model", str(other / "config.json"), "--record", "--seq", "32",
                     "--measurements", str(tmp_path / "m"))
    assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
    assert "holds the curves of another config named 'tiny-llama'" in result.stderr
    assert path.read_bytes() == before


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_fit_answers_for_a_gpu_by_default_and_says_the_target_and_length(tmp_path: Path) -> None:
    result = run_cli("fit", "--budget", "150MiB", "--model", str(TINY_MODEL), "--seq", "64", "--jobs", "1",
                     "--measurements", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("tiny-llama (139,584 parameters) in 150 MiB on a GPU, 64 tokens a sequence, ")
    assert "the CUDA caching allocator's reserve (simulated)" in result.stdout


def test_diff_refuses_an_environment_folder_that_is_a_link_as_build_does(measured_root: Path, tmp_path: Path) -> None:
    (environment,) = [p for p in measured_root.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))]
    root = tmp_path / "m"
    root.mkdir()
    (root / "linked").symlink_to(environment, target_is_directory=True)
    for command in (["diff", "linked", "linked", "--measurements", str(root)], ["diff", str(root / "linked"),
                                                                               str(environment)]):
        result = run_cli(*command)
        assert result.returncode == 2 and "is a link" in result.stderr and result.stderr.count("\n") == 1, result


def test_a_write_that_fails_midway_names_its_file_and_leaves_nothing(monkeypatch, tmp_path: Path) -> None:
    import os

    from generator.store.files import write_atomic

    def full(descriptor: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    path = tmp_path / "env" / "row.toml"
    with pytest.raises(OSError) as failed:
        write_atomic(path, "x = 1\n")
    assert failed.value.filename == str(path) and failed.value.strerror == "No space left on device"
    assert list(path.parent.iterdir()) == []


def test_what_is_written_in_a_shared_folder_keeps_its_group_permissions(tmp_path: Path) -> None:
    import stat

    from generator.store.files import write_atomic

    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o2775)
    write_atomic(shared / "env" / "model" / "row.toml", "x = 1\n")
    for folder in (shared / "env", shared / "env" / "model"):
        assert folder.stat().st_mode & (stat.S_ISGID | 0o070) == stat.S_ISGID | 0o070, oct(folder.stat().st_mode)
    assert (shared / "env" / "model" / "row.toml").stat().st_mode & 0o060 == 0o060
    plain = tmp_path / "plain"
    write_atomic(plain / "a" / "row.toml", "x = 1\n")
    assert not (plain / "a").stat().st_mode & stat.S_ISGID


def test_the_quick_start_says_which_python_and_how_the_command_gets_on_path() -> None:
    import re
    import tomllib

    root = Path(__file__).resolve().parent.parent
    needed = tomllib.loads((root / "pyproject.toml").read_text())["project"]["requires-python"]
    quick = root.joinpath("README.md").read_text().split("## Set up", 1)[1].split("\n## ", 1)[0]
    assert f"Python {needed.removeprefix('>=')} or newer" in quick
    assert re.search(r"pipx install|uv tool install", quick) and ".nox/measure/bin/memory-budget" in quick


def test_one_documented_command_refreshes_for_a_new_release() -> None:
    root = Path(__file__).resolve().parent.parent
    docs = root.joinpath("templates", "docs-releases.md").read_text()  # the docs page, built into site/
    assert "nox -s release " in root.joinpath("README.md").read_text()  # in its code block
    section = docs.split("## The day a new transformers ships", 1)[1]
    section = section.split("\n## ", 1)[0].strip()
    assert "`nox -s release`" in section and len(section.splitlines()) <= 5
    noxfile = root.joinpath("noxfile.py").read_text()
    assert "def release(session" in noxfile and '"memory-budget", "build"' in noxfile.split("def release(")[1]


# ------------------------------------------------ safe answers under an unmeasured release, and outside the checkout

MEASUREMENTS = Path(__file__).resolve().parent.parent / "measurements"


def _largest_training_row(folder: Path) -> tuple[int, int]:
    """SmolLM2's plain training row of the largest batch at 256 tokens measured in a folder: (batch, its
    whole-process peak)."""
    from generator.store.catalog import Catalog

    found = [r for r in Catalog(MEASUREMENTS).every_result(folder) if r.model.name == "SmolLM2-135M-Instruct"
             and r.finished and r.row.id == f"train-b{r.row.batch_size}-s256"]
    largest = max(found, key=lambda r: r.row.batch_size)
    return largest.row.batch_size, largest.summary.peak_rss_bytes


def _full_training_answer(measurements: Path, here) -> tuple[int, int, str, str]:
    """fit --target cpu --seq 256 for SmolLM2's full training, its budget 1 % under the whole-process peak that
    its largest training row measured where the process model comes from (so that batch ran over it): (the
    answer, that row's batch, the process model, the margin's reason)."""
    from dataclasses import replace as replaced

    from generator.answers.margin import validated_margin
    from generator.answers.overhead import overhead_model, overhead_source
    from generator.model_source import resolve_model
    from generator.predict.fit import Predictor, fit
    from generator.store.catalog import Catalog
    from generator.store.layout import reading_root

    root, note = reading_root(measurements)
    source = overhead_source(Catalog(root), here)
    assert source is not None
    measured, peak = _largest_training_row(source.folder)
    budget = int(peak * 0.99)  # the measured batch ran over it: a safe answer is a smaller batch
    model = overhead_model(Catalog(root), here)
    model = replaced(model, source=model.source + note)
    margin, why = validated_margin(measurements, "glibc", "cpu", here)
    (answer,) = fit(Predictor(resolve_model(None), model), 256, budget, margin, kinds=("full training",))
    return answer.batch, measured, model.describe(), why


def test_under_a_release_no_one_measured_fit_borrows_the_nearest_and_answers_a_batch_that_fits() -> None:
    from generator.measure.environment import collect_environment

    here = replace(collect_environment(), id="cpu-torch2.13.0_cpu-transformers9.9.9-peft0.21.2-py3.11-000000",
                   transformers="9.9.9")
    batch, measured, process, why = _full_training_answer(MEASUREMENTS, here)
    assert 1 <= batch < measured, (batch, measured)
    assert "the nearest measured release (transformers 5.24.0)" in process and "fell short of" in process
    assert "widened by the" in why and "the nearest measured release" in why


def test_from_an_empty_folder_fit_reads_the_shipped_measurements_and_answers_a_batch_that_fits(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from generator.measure.environment import collect_environment

    monkeypatch.chdir(tmp_path)  # where a user who installed the tool works: no ./measurements
    batch, measured, process, why = _full_training_answer(Path("measurements"), collect_environment())
    assert 1 <= batch < measured, (batch, measured)
    assert process.endswith("read from the measurements shipped with memory-budget (the folder given holds no rows)")
    assert why.endswith("(the folder given holds no rows)")


def test_for_your_own_model_installs_the_versions_the_page_ran_and_gives_every_command_its_length() -> None:
    from generator.report.answer import pinned_install
    from generator.store.fit_table import load_fit

    root = Path(__file__).resolve().parent.parent
    (table,) = [load_fit(path.parent) for path in (root / "measurements").glob("*/_fit.toml")]
    assert table is not None
    install = pinned_install(table)
    noxfile = root.joinpath("noxfile.py").read_text()
    for pin in install.split():
        assert f'"{pin}"' in noxfile, pin  # the pins the suite and the main job install
    block = root.joinpath("site", "index.md").read_text().split("For your own model:", 1)[1].split("```")[1]
    assert f"pip install '.[measure]' {install}" in block
    commands = [line for line in block.splitlines() if line.startswith("memory-budget fit")]
    assert len(commands) == 2 and all(f"--seq {table.seq_len}" in line for line in commands)
