"""Nothing lost, nothing absurd published: one test per item of the data-safety issue.

1. build writes only what it owns; 2. two models' results never collide; 3. damaged figures are refused;
4. one rule picks the process model; 5. diff refuses a comparison of nothing; 6. a stopped row is completed;
7. inputs that got a traceback; 8. file modes, damaged logs, links, read-only outputs, thresholds;
9. no library noise on the tool's stderr."""

import json
import os
import shutil
import stat
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import tomli_w
from conftest import TINY_MODEL, run_cli
from test_bad_input import assert_refused
from test_mutation_figures import ENV, _row

from generator.answers.overhead import overhead_model, overhead_source
from generator.store import catalog as catalog_module
from generator.store.catalog import Catalog
from generator.store.codec import save
from generator.store.environment import Environment
from generator.store.records import ResultsError

# ---------------------------------------------------------------- 1. build writes only what it owns


def _build(measurements: Path, output: Path, *extra: str, cwd: Path | None = None):
    return run_cli("build", "--measurements", str(measurements), "--output", str(output), *extra, cwd=cwd)


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_build_into_a_project_folder_is_refused_and_deletes_nothing(measured_root: Path, tmp_path: Path) -> None:
    project = tmp_path / "project"
    shutil.copytree(measured_root, project / "measurements")
    (project / "index.md").write_text("# my project\n")
    (project / "src").mkdir()
    (project / "src" / "train.py").write_text("print('train')\n")
    before = _tree(project)
    assert_refused(_build(project / "measurements", Path("."), cwd=project), "measurements folder")
    assert _tree(project) == before
    elsewhere = tmp_path / "plain"
    elsewhere.mkdir()
    (elsewhere / "index.md").write_text("# mine\n")
    (elsewhere / "index.html").write_text("<p>mine</p>\n")
    (elsewhere / "train.py").write_text("print('train')\n")
    assert_refused(_build(measured_root, elsewhere), "did not write (train.py)", "--force")
    assert (elsewhere / "train.py").read_text() == "print('train')\n"


def test_build_into_the_measurements_folder_is_refused_even_with_force(measurements_copy: Path) -> None:
    before = _tree(measurements_copy)
    for output in (measurements_copy, measurements_copy / "site", measurements_copy.parent):
        assert_refused(_build(measurements_copy, output, "--force"), "measurements folder")
    assert _tree(measurements_copy) == before


def test_a_rebuild_keeps_cname_and_listed_files_and_refuses_unlisted_ones(measured_root: Path,
                                                                          tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert _build(measured_root, site).returncode == 0
    manifest = (site / ".memory-budget-manifest").read_text().splitlines()
    assert "index.md" in manifest and "index.html" in manifest
    (site / "CNAME").write_text("memory.example.org\n")
    (site / ".nojekyll").write_text("")
    assert _build(measured_root, site).returncode == 0
    assert (site / "CNAME").read_text() == "memory.example.org\n" and (site / ".nojekyll").exists()
    (site / "extra").mkdir()
    (site / "extra" / "notes.txt").write_text("mine\n")
    assert_refused(_build(measured_root, site), "extra/notes.txt", ".memory-budget-keep")
    assert (site / "extra" / "notes.txt").read_text() == "mine\n"
    (site / ".memory-budget-keep").write_text("# my files\nextra/\n")
    assert _build(measured_root, site).returncode == 0
    assert (site / "extra" / "notes.txt").read_text() == "mine\n" and (site / "CNAME").exists()
    (site / "stray.txt").write_text("x")
    assert _build(measured_root, site, "--force").returncode == 0
    assert not (site / "stray.txt").exists() and (site / "extra" / "notes.txt").exists()


def test_a_site_built_before_manifests_is_still_replaced(measured_root: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    assert _build(measured_root, site).returncode == 0
    (site / ".memory-budget-manifest").unlink()
    (site / "old-chart.svg").write_text("<svg/>")
    assert _build(measured_root, site).returncode == 0
    assert not (site / "old-chart.svg").exists()

# ---------------------------------------------------------------- 2. two models never collide


@pytest.mark.slow  # simulates at scale or starts real processes
def test_two_config_json_models_both_survive_and_the_page_shows_both(tmp_path: Path) -> None:
    measurements = tmp_path / "m"
    tiny = json.loads(TINY_MODEL.read_text())
    for name, layers in (("c1", tiny["num_hidden_layers"]), ("c2", tiny["num_hidden_layers"] + 1)):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text(json.dumps({**tiny, "num_hidden_layers": layers}))
        result = run_cli("measure", "--model", str(tmp_path / name / "config.json"), "--rows", "infer-b1-s32",
                         "--repeats", "1", "--output", str(measurements))
        assert result.returncode == 0, result.stderr
        assert "1 row(s) measured" in result.stderr
    (environment,) = [p for p in measurements.iterdir() if p.is_dir()]
    folders = sorted(p.name for p in environment.iterdir() if p.is_dir())
    assert folders == ["c1", "c2"]
    models = {tomllib.loads((environment / f / "infer-b1-s32.toml").read_text())["model"]["name"] for f in folders}
    assert models == {"c1", "c2"}
    site = tmp_path / "site"
    assert _build(measurements, site, "--model", "c1").returncode == 0
    page = (site / "index.md").read_text()
    assert "Peak memory of c1" in page and "also holds c2 (1 row:" in page


def test_a_folder_of_another_config_gets_a_hashed_name_and_a_third_is_refused(tmp_path: Path) -> None:
    base = _row("train-b1-s256", 10_000_000)
    first = replace(base, model=replace(base.model, name="a<b", config_sha256="1" * 64))
    save(first, catalog_module.model_folder(tmp_path, ENV.id, "a<b", "1" * 64))
    assert catalog_module.model_folder(tmp_path, ENV.id, "a<b", "1" * 64).name == "a_b"
    other = catalog_module.model_folder(tmp_path, ENV.id, "a>b", "1" * 64)
    assert other.name.startswith("a_b-") and len(other.name) == len("a_b-") + 8
    second = replace(base, model=replace(base.model, name="a>b", config_sha256="1" * 64))
    save(second, other)
    assert catalog_module.model_folder(tmp_path, ENV.id, "a>b", "1" * 64) == other  # its own, found again
    third = catalog_module.model_folder(tmp_path, ENV.id, "a<b", "3" * 64)  # another config of that name
    assert third not in (other, other.with_name("a_b"))
    squatter = replace(base, model=replace(base.model, name="someone", config_sha256="2" * 64))
    save(squatter, third)  # a planted collision: both of its candidate folders now hold other models' rows
    with pytest.raises(ResultsError, match="refusing to write over them"):
        catalog_module.model_folder(tmp_path, ENV.id, "a<b", "3" * 64)

# ---------------------------------------------------------------- 3. damaged figures are refused


def _edit_row(measurements: Path, row: str, change) -> Path:
    (path,) = measurements.glob(f"*/*/{row}.toml")
    document = tomllib.loads(path.read_text())
    change(document)
    path.write_text(tomli_w.dumps(document))
    return path


@pytest.mark.parametrize(("change", "field"), [
    (lambda d: d["result"].update(net_peak_bytes=9_000_000_000_000_000_000), "net_peak_bytes"),
    (lambda d: d["result"].update(peak_rss_bytes=2**63 - 1), "peak_rss_bytes"),
    (lambda d: (d["environment"].update(total_memory_bytes=0), d["result"].update(peak_rss_bytes=2**63 - 1)),
     "peak_rss_bytes"),
    (lambda d: d["result"].update(net_peak_bytes=d["result"]["net_peak_max_bytes"] + 1), "outside"),
    (lambda d: d["result"].update(baseline_bytes=0, peak_rss_bytes=d["result"]["net_peak_bytes"] - 1),
     "below net_peak_bytes"),
])
def test_damaged_figures_are_refused_by_build_and_diff(measurements_copy: Path, tmp_path: Path, change,
                                                       field: str) -> None:
    path = _edit_row(measurements_copy, "train-b8-s256", change)
    assert_refused(_build(measurements_copy, tmp_path / "site"), str(path), field)
    (environment,) = [p.name for p in measurements_copy.iterdir() if p.is_dir()]
    assert_refused(run_cli("diff", "--measurements", str(measurements_copy), environment, environment), field)
    assert not (tmp_path / "site").exists()

# ---------------------------------------------------------------- 4. one rule for the process model


def _environment(name: str, transformers: str) -> Environment:
    return replace(ENV, id=name, transformers=transformers)


def _predicted_rows(root: Path, environment: Environment, measured_at: str, extra: int) -> None:
    for batch in (1, 2, 4):
        base = _row(f"train-b{batch}-s256", 20_000_000 * batch + extra, prediction=10_000_000 * batch,
                    measured_at=measured_at)
        save(replace(base, environment=environment), root / environment.id / "tiny")


def test_the_process_model_is_this_machines_else_the_newest_with_the_same_libraries(tmp_path: Path) -> None:
    older, newer = _environment("cpu-older", "5.24"), _environment("cpu-newer", "5.24")
    _predicted_rows(tmp_path, older, "2026-01-01T00:00:00", 0)
    _predicted_rows(tmp_path, newer, "2026-02-01T00:00:00", 1_000_000)
    _predicted_rows(tmp_path, _environment("cpu-another-release", "4.57"), "2026-03-01T00:00:00", 5_000_000)
    catalog = Catalog(tmp_path)
    here = _environment("cpu-here", "5.24")
    found = overhead_source(catalog, here)
    assert found is not None and found.folder.name == "cpu-newer" and found.borrowed
    model = overhead_model(catalog, here)
    assert model.fixed == pytest.approx(1_000_000) and "borrowed: cpu-here has no such rows" in model.source
    own = overhead_model(catalog, older)
    assert own.fixed == pytest.approx(0, abs=1) and "borrowed" not in own.source
    elsewhere = overhead_source(catalog, _environment("cpu-elsewhere", "5.0"))  # no environment has 5.0's rows
    # the newest release at or below 5.0 is 4.57's; its model (5 MB over the tensors) was never short of 5.24's rows
    assert elsewhere is not None and elsewhere.folder.name == "cpu-another-release" and elsewhere.release == "4.57"
    assert elsewhere.spread == pytest.approx(0.0)
    later = overhead_source(catalog, _environment("cpu-later", "5.30"))  # the newest below: 5.24's, short of 4.57's
    assert later is not None and later.folder.name == "cpu-newer" and later.spread == pytest.approx(25 / 21 - 1)
    assert "the nearest measured release (transformers 4.57)" in overhead_model(
        catalog, _environment("cpu-elsewhere", "5.0")).source
    assert overhead_source(Catalog(tmp_path / "none"), _environment("cpu-elsewhere", "5.0")) is None

# ---------------------------------------------------------------- 5. diff refuses a comparison of nothing


def test_diff_with_no_rows_in_common_exits_2(measurements_copy: Path) -> None:
    (environment,) = [p for p in measurements_copy.iterdir() if p.is_dir()]
    (folder,) = [p for p in environment.iterdir() if p.is_dir()]
    other = measurements_copy / "cpu-other" / folder.name
    other.mkdir(parents=True)
    for path in folder.glob("infer-*.toml"):
        document = tomllib.loads(path.read_text())
        document["environment"]["id"] = "cpu-other"
        (other / path.name).write_text(tomli_w.dumps(document))
        path.unlink()
    result = run_cli("diff", "--measurements", str(measurements_copy), environment.name, "cpu-other")
    assert_refused(result, "no row", "nothing was checked")


def test_diff_of_one_environment_in_two_folders_names_the_folders(measured_root: Path, tmp_path: Path) -> None:
    (environment,) = [p for p in measured_root.iterdir() if p.is_dir()]
    copy = tmp_path / "copy" / environment.name
    shutil.copytree(environment, copy)
    result = run_cli("diff", "--measurements", str(measured_root), str(environment), str(copy), "--format", "json")
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)
    assert (document["before"], document["after"]) == (str(environment), str(copy))
    assert document["before"] != document["after"] and document["rows"]

# ---------------------------------------------------------------- 6. a stopped row is completed


def test_a_row_with_fewer_repeats_than_asked_is_completed_without_force(measurements_copy: Path) -> None:
    (path,) = measurements_copy.glob("*/*/infer-b1-s256.toml")
    first = tomllib.loads(path.read_text())["repeats"]
    assert len(first) == 1
    result = run_cli("measure", "--model", str(TINY_MODEL), "--rows", "infer-b1", "--repeats", "2",
                     "--output", str(measurements_copy))
    assert result.returncode == 0, result.stderr
    assert "completing its 1 repeat(s)" in result.stderr
    repeats = tomllib.loads(path.read_text())["repeats"]
    assert len(repeats) == 2 and repeats[0] == first[0]
    again = run_cli("measure", "--model", str(TINY_MODEL), "--rows", "infer-b1", "--repeats", "2",
                    "--output", str(measurements_copy))
    assert "already measured" in again.stderr and len(tomllib.loads(path.read_text())["repeats"]) == 2

# ---------------------------------------------------------------- 7. inputs that got a traceback


def _config(tmp_path: Path, **changes: object) -> str:
    path = tmp_path / f"model-{'-'.join(changes)}.json"
    path.write_text(json.dumps({**json.loads(TINY_MODEL.read_text()), **changes}))
    return str(path)


@pytest.mark.parametrize(("args", "expected"), [
    (["fit", "--budget", "1" + "0" * 400 + "GiB"], "over 1 EiB"),
    (["measure", "--memory-limit", "1" + "0" * 400 + "GiB"], "over 1 EiB"),
    (["fit", "--budget", "24"], "'24' has no unit: say 24GiB"),
    (["predict", "--model", "{vocab_size_0}"], "vocab_size is 0"),
    (["fit", "--budget", "24GiB", "--model", "{layers_0}"], "num_hidden_layers is 0"),
    (["predict", "--rows", "train-b1-s32-lora8", "--lora-targets", "nonexistent_module"], "no module of that name"),
    (["predict", "--rows", "train-b1-s32", "--lora-targets", "nonexistent_module"], "no module of that name"),
    (["diff", "a", "b", "--threshold=-5%"], "must be 0% or more"),
])
@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_inputs_that_got_a_traceback_are_refused_in_one_line(tmp_path: Path, args: list[str],
                                                             expected: str) -> None:
    configs = {"{vocab_size_0}": _config(tmp_path, vocab_size=0), "{layers_0}": _config(tmp_path, num_hidden_layers=0)}
    args = [configs.get(arg, arg) for arg in args]
    if args[0] == "predict" and "--model" not in args:
        args += ["--model", str(TINY_MODEL)]
    result = run_cli(*args, "--measurements" if args[0] != "measure" else "--output", str(tmp_path / "m"))
    assert_refused(result, expected)

# ---------------------------------------------------------------- 8. modes, logs, links, outputs


def test_result_files_and_pages_are_readable_by_others(measured_folder: Path, tmp_path: Path,
                                                       measured_root: Path) -> None:
    for path in measured_folder.glob("*.toml"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask(), path
    site = tmp_path / "site"
    assert _build(measured_root, site).returncode == 0
    assert stat.S_IMODE((site / "index.md").stat().st_mode) == 0o666 & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_damaged_runs_log_stops_measure_before_it_starts_and_is_kept(measurements_copy: Path) -> None:
    (folder,) = measurements_copy.glob("*/*/")
    log = folder / "_runs.toml"
    log.write_text("runs = [\n")
    result = run_cli("measure", "--model", str(TINY_MODEL), "--rows", "infer-b2", "--repeats", "1",
                     "--output", str(measurements_copy))
    assert_refused(result, "_runs.toml", "not valid TOML")
    assert log.read_text() == "runs = [\n" and not (folder / "infer-b2-s256.toml").exists()


def test_links_in_measurements_are_refused(measurements_copy: Path, tmp_path: Path) -> None:
    (environment,) = [p for p in measurements_copy.iterdir() if p.is_dir()]
    outside = tmp_path / "outside"
    shutil.copytree(environment, outside)
    (measurements_copy / "cpu-linked").symlink_to(outside, target_is_directory=True)
    assert_refused(_build(measurements_copy, tmp_path / "site"), "cpu-linked: is a link")
    (measurements_copy / "cpu-linked").unlink()
    (folder,) = [p for p in environment.iterdir() if p.is_dir()]
    (folder / "train-b64-s256.toml").symlink_to(outside / folder.name / "train-b8-s256.toml")
    assert_refused(_build(measurements_copy, tmp_path / "site"), "train-b64-s256.toml: is a link")


def test_a_read_only_output_is_named_as_given(measured_root: Path) -> None:
    """/proc refuses new files to root too, as a read-only mount does, so the test holds as root in CI."""
    result = _build(measured_root, Path("/proc/site"))
    assert_refused(result, "--output /proc/site: cannot write there")
    assert ".site-" not in result.stderr

# ---------------------------------------------------------------- 9. no library noise


@pytest.mark.slow  # simulates at scale or starts real processes
def test_predict_prints_no_library_noise(tmp_path: Path) -> None:
    for model, rows in (("gpt2", ["train-b1-s16-lora8"]), (str(TINY_MODEL), ["train-b1-s16", "gen-b1-s16-n2"])):
        result = run_cli("predict", "--model", model, "--rows", *rows, "--measurements", str(tmp_path))
        assert result.returncode == 0, result.stderr
        assert result.stderr == "", result.stderr


def test_recording_one_benchmark_keeps_the_others(tmp_path: Path) -> None:
    """A benchmark file holds several tables (predict, fit, sensitivity); appending to one kept only that one,
    which is how this project's sensitivity record and a whole before-and-after benchmark were lost."""
    from generator.store import runlog

    runlog.record_benchmark(tmp_path, "predict", {"at": "1", "cases": [{"wall_seconds": 1.5}]})
    runlog.record_benchmark(tmp_path, "sensitivity", {"at": "2"})
    runlog.record_benchmark(tmp_path, "fit", {"at": "3"})
    runlog.record_benchmark(tmp_path, "predict", {"at": "4", "cases": []})
    document = tomllib.loads((tmp_path / "_benchmarks.toml").read_text())
    assert [entry["at"] for entry in document["predict"]] == ["1", "4"]
    assert document["predict"][0]["cases"] == [{"wall_seconds": 1.5}]
    assert [entry["at"] for entry in document["sensitivity"]] == ["2"] and document["fit"] == [{"at": "3"}]
