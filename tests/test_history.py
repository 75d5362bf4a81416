"""Memory history across releases: the file, the steps the versions page names, and the command."""

from pathlib import Path

import pytest
from conftest import TINY_MODEL, run_cli

from generator.report.history import history_context, steps
from generator.store.history import ReleaseEntry, RowPeak, history_path, load_history, save_release
from generator.store.records import ResultsError
from generator.units import MIB


def _entry(version: str, peak: int, activations: int = 0, error: str = "") -> ReleaseEntry:
    rows = () if error else (RowPeak(row="train-b8-s256", tensor_peak_bytes=peak, activations_bytes=activations,
                                     weights_bytes=7), RowPeak(row="infer-b1-s256", error="no such op"))
    return ReleaseEntry(transformers=version, torch="2.13.0", peft="0.21.2", seconds=2.0, rows=rows, error=error)


def test_releases_are_kept_in_release_order_and_replaced(tmp_path: Path) -> None:
    path = history_path(tmp_path, "m")
    for entry in (_entry("5.10.0", 100), _entry("4.9.0", 90), _entry("5.2.0", 95), _entry("5.10.0", 101)):
        save_release(path, entry)
    assert [(e.transformers, e.rows[0].tensor_peak_bytes) for e in load_history(path)] == [
        ("4.9.0", 90), ("5.2.0", 95), ("5.10.0", 101)]  # 5.10 after 5.2, and the newer 5.10.0 entry kept
    path.write_text(path.read_text().replace("schema_version = 1", "schema_version = 7"))
    with pytest.raises(ResultsError, match="schema version 7"):
        load_history(path)


def test_steps_of_one_percent_or_more_are_named_with_their_release_and_category() -> None:
    entries = (_entry("4.40.0", 1000 * MIB, 500 * MIB), _entry("4.41.0", 1009 * MIB, 509 * MIB),
               _entry("4.42.0", 1040 * MIB, 540 * MIB), _entry("4.43.0", 1040 * MIB, 540 * MIB),
               _entry("5.0.0", 0, error="could not be installed: no wheel"), _entry("5.1.0", 980 * MIB, 480 * MIB))
    found = steps(entries)
    assert [(s.before, s.after) for s in found] == [("4.41.0", "4.42.0"), ("4.43.0", "5.1.0")]
    assert found[0].change == "+3.1 % (+31 MiB)" and found[0].category == "activations and temporaries (+31 MiB)"
    assert found[1].change_value == pytest.approx(980 / 1040 - 1) and found[1].change.startswith("−5.8 %")
    context = history_context("m", entries)
    assert context is not None and context.releases == ("4.40.0", "4.41.0", "4.42.0", "4.43.0", "5.1.0")
    assert context.failed == (("5.0.0", "could not be installed: no wheel"),)
    assert (context.first, context.last, context.seconds) == ("4.40.0", "5.1.0", "12 s")
    assert ("train-b8-s256", "4.40.0", 1000.0) in context.points
    assert history_context("m", ()) is None


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_the_command_records_the_installed_release(tmp_path: Path) -> None:
    result = run_cli("history", "--model", str(TINY_MODEL), "--seq", "32", "--rows", "infer-b1", "train-b2",
                     "--measurements", str(tmp_path))
    assert result.returncode == 0, result.stderr
    (entry,) = load_history(history_path(tmp_path, "tiny-llama"))
    assert [peak.row for peak in entry.rows] == ["infer-b1-s32", "train-b2-s32"]
    assert all(peak.tensor_peak_bytes > 0 for peak in entry.rows) and entry.transformers
    refused = run_cli("history", "--model", str(TINY_MODEL), "--not-installable", "4.1.0: no wheel for py3.11",
                      "--measurements", str(tmp_path))
    assert refused.returncode == 1
    assert load_history(history_path(tmp_path, "tiny-llama"))[0].error == "could not be installed: no wheel for py3.11"
