"""The allocator as a recorded coordinate of a row: the environment each allocator's worker server starts with,
refusals, the record in the result file, and the tuned setting's process peak against the simulated tensors."""

import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import TINY_MODEL, run_cli

from generator.matrix import RowError, parse_row, under_allocators
from generator.measure import allocator as allocators
from generator.store.catalog import load_folder
from generator.store.codec import load_file

pytestmark = pytest.mark.slow  # measures real worker processes under each allocator


def _package_installed(package: str) -> bool:
    """Whether Debian's package database says the package is installed (False where there is no dpkg)."""
    if shutil.which("dpkg-query") is None:
        return False
    status = subprocess.run(["dpkg-query", "-W", "-f=${Status}", package], capture_output=True, text=True,
                            check=False)
    return status.stdout.strip() == "install ok installed"


def test_each_allocator_gets_its_own_environment_and_nothing_of_the_others() -> None:
    base = {"PATH": "/bin", "LD_PRELOAD": "/x.so", "MALLOC_MMAP_THRESHOLD_": "1", "MALLOC_TRIM_THRESHOLD_": "2"}
    assert allocators.allocator_environment("glibc", base) == {"PATH": "/bin"}
    assert allocators.allocator_environment("glibc-tuned", base) == {
        "PATH": "/bin", "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
    for name in ("jemalloc", "tcmalloc"):
        path = allocators.library_path(name)
        if _package_installed(allocators.PACKAGES[name]):  # .ci/run installs both: the library must be found
            assert path is not None, f"{allocators.PACKAGES[name]} is installed but {name}'s library is not found"
            assert allocators.allocator_environment(name, base) == {"PATH": "/bin", "LD_PRELOAD": str(path)}
        else:  # a bare machine: refused in one line that names the package
            with pytest.raises(allocators.AllocatorError, match=allocators.PACKAGES[name]):
                allocators.allocator_environment(name, base)
    with pytest.raises(allocators.AllocatorError, match="unknown allocator"):
        allocators.allocator_environment("mimalloc", base)


def test_a_missing_library_is_one_clear_line(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from generator.cli import main

    monkeypatch.setattr(allocators, "LIBRARY_FOLDERS", ("/nowhere",))
    with pytest.raises(allocators.AllocatorError, match="apt install libjemalloc2"):
        allocators.allocator_environment("jemalloc", {})
    assert main(["measure", "--model", str(TINY_MODEL), "--rows", "infer-b1-s32", "--allocator", "tcmalloc",
                 "--output", "/nonexistent/never-written"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "apt install libtcmalloc-minimal4" in err


def test_a_worker_refuses_settings_that_are_not_its_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in ("LD_PRELOAD", *allocators.TUNED):
        monkeypatch.delenv(key, raising=False)
    assert allocators.check_in_effect("glibc") == ""
    with pytest.raises(allocators.AllocatorError, match="not those of glibc-tuned"):
        allocators.check_in_effect("glibc-tuned")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert allocators.check_in_effect("glibc-tuned") == "MALLOC_MMAP_THRESHOLD_=131072"
    with pytest.raises(allocators.AllocatorError, match="not those of glibc"):
        allocators.check_in_effect("glibc")


def test_the_allocator_is_spelled_last_in_a_row_id() -> None:
    assert parse_row("train-b8-glibc-tuned").id == "train-b8-s256-glibc-tuned"
    assert parse_row("train-b8-glibc").id == "train-b8-s256"
    assert parse_row("baseline-jemalloc").allocator == "jemalloc"
    with pytest.raises(RowError, match="the allocator goes last"):
        parse_row("train-b8-tcmalloc-ckpt")
    rows = under_allocators([parse_row("infer-b1"), parse_row("train-b1-jemalloc")], ["glibc", "glibc-tuned"])
    assert [row.id for row in rows] == ["infer-b1-s256", "infer-b1-s256-glibc-tuned", "train-b1-s256-jemalloc"]


def test_the_tuned_process_returns_freed_activations(tmp_path: Path) -> None:
    """Under glibc-tuned every block over 128 KiB is its own mapping, returned when freed: the process holds at least
    its simulated tensors, and a training row peaks lower than under default glibc, which keeps freed activations.

    What the tuned process holds beyond its tensors depends on the machine: here (AMD EPYC, THP madvise) the tiny
    batch-16 training row holds its tensor peak plus about 31 MiB, and CI's machine once held about 91 MiB more
    than its tensors (a runtime this test cannot see). The closeness is judged out of sample on each machine's
    own rows (the next test, and answers/accuracy.py on the committed ones), not as a fixed allowance here."""
    rows = ("train-b16-s512", "infer-b16-s512")
    measured = run_cli("measure", "--model", str(TINY_MODEL), "--rows", *rows, "--allocator", "glibc",
                       "glibc-tuned", "--repeats", "1", "--output", str(tmp_path))
    assert measured.returncode == 0, measured.stderr
    predicted = run_cli("predict", "--model", str(TINY_MODEL), "--rows", *rows, "--measurements", str(tmp_path),
                        "--format", "json")
    import json

    tensor = {item["row"]: item["tensor_peak_bytes"] for item in json.loads(predicted.stdout)}
    (folder,) = [path for path in tmp_path.glob("*/*") if path.is_dir()]
    results = {r.row.id: r for r in load_folder(folder)}
    machine = next(iter(results.values())).environment
    where = f"on {machine.cpu} ({machine.cpu_features}), THP {machine.thp}"
    for row in rows:
        tuned = results[f"{row}-glibc-tuned"]
        assert tuned.repeats[0].allocator_settings == "MALLOC_MMAP_THRESHOLD_=131072 MALLOC_TRIM_THRESHOLD_=131072"
        assert tuned.summary.net_peak_bytes >= 0.95 * tensor[row], (row, where)
    tuned_train = results["train-b16-s512-glibc-tuned"].summary.net_peak_bytes
    default_train = results["train-b16-s512"].summary.net_peak_bytes
    assert default_train > tuned_train, (default_train, tuned_train, tensor["train-b16-s512"], where)


def test_the_tuned_prediction_of_a_held_out_row_is_within_5_percent(tmp_path: Path) -> None:
    """Out of sample: the glibc-tuned overhead line is fitted on three measured training rows of this machine
    (batch 4, 8 and 32), then predicts batch 16, between them, before it is measured: whatever this machine's
    runtime adds, a line through its own rows carries it. Stated tolerance: the measured net peak is within 5 %
    of the prediction."""
    model, fitted = ("--model", str(TINY_MODEL)), ("train-b4-s512", "train-b8-s512", "train-b32-s512")
    common = ("--allocator", "glibc-tuned", "--repeats", "1", "--output", str(tmp_path))
    assert run_cli("measure", *model, "--rows", *fitted, *common).returncode == 0
    recorded = run_cli("predict", *model, "--rows", *fitted, "--allocator", "glibc-tuned", "--record",
                       "--measurements", str(tmp_path))
    assert "recorded 3 prediction(s)" in recorded.stderr, recorded.stderr
    predicted = run_cli("predict", *model, "--rows", "train-b16-s512", "--allocator", "glibc-tuned", "--format",
                        "json", "--measurements", str(tmp_path))
    import json

    (item,) = json.loads(predicted.stdout)
    assert item["row"] == "train-b16-s512-glibc-tuned" and "fitted on 3 measured rows" in item["process_model"]
    assert run_cli("measure", *model, "--rows", "train-b16-s512", *common).returncode == 0
    (path,) = tmp_path.glob("*/*/train-b16-s512-glibc-tuned.toml")
    measured = load_file(path).summary.net_peak_bytes
    assert abs(measured - item["peak_bytes"]) <= 0.05 * item["peak_bytes"], (measured, item["peak_bytes"])


def test_predict_takes_one_allocator_at_a_time(capsys) -> None:
    from generator.cli import main

    assert main(["predict", "--model", str(TINY_MODEL), "--rows", "infer-b1-s32-jemalloc", "infer-b1-s32",
                 "--allocator", "glibc-tuned"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "one allocator at a time; the rows name glibc-tuned, jemalloc" in err
