"""The TOML schema: round trip, versioning, strict loading."""

import tomllib
from pathlib import Path

import pytest
import tomli_w

from generator.store.codec import load_file, parse, to_toml
from generator.store.records import SCHEMA_VERSION, Repeat, ResultsError


def test_round_trip_keeps_every_field(measured_folder: Path) -> None:
    for path in measured_folder.glob("*.toml"):
        if path.name.startswith("_"):
            continue
        result = load_file(path)
        assert parse(to_toml(result), path) == result


def test_written_files_have_sorted_keys(measured_folder: Path) -> None:
    text = (measured_folder / "train-b8-s256.toml").read_text()
    document = tomllib.loads(text)
    for table in ("row", "model", "environment", "result"):
        keys = list(document[table])  # TOML puts a table's plain keys before its sub-tables
        scalars = [key for key in keys if not isinstance(document[table][key], dict)]
        tables = [key for key in keys if isinstance(document[table][key], dict)]
        assert keys == sorted(scalars) + sorted(tables)


@pytest.mark.parametrize(("version", "word"), [(SCHEMA_VERSION + 1, "newer"), (0, "older")])
def test_unknown_schema_versions_are_refused(measured_folder: Path, tmp_path: Path, version: int,
                                             word: str) -> None:
    document = tomllib.loads((measured_folder / "train-b8-s256.toml").read_text())
    document["schema_version"] = version
    path = tmp_path / "train-b8-s256.toml"
    path.write_text(tomli_w.dumps(document))
    with pytest.raises(ResultsError, match=f"schema version {version} is {word}"):
        load_file(path)


def test_a_file_whose_name_disagrees_with_its_row_is_refused(measured_folder: Path, tmp_path: Path) -> None:
    path = tmp_path / "train-b1-s256.toml"
    path.write_text((measured_folder / "train-b8-s256.toml").read_text())
    with pytest.raises(ResultsError, match=r"expected train-b8-s256\.toml"):
        load_file(path)


def test_wrong_types_are_refused(measured_folder: Path, tmp_path: Path) -> None:
    document = tomllib.loads((measured_folder / "train-b8-s256.toml").read_text())
    document["result"]["net_peak_bytes"] = "a lot"
    path = tmp_path / "train-b8-s256.toml"
    path.write_text(tomli_w.dumps(document))
    with pytest.raises(ResultsError, match="net_peak_bytes"):
        load_file(path)


def _repeat(peak: int, swap: dict[str, int], wall: float) -> Repeat:
    return Repeat(status="ok", baseline_bytes=100, peak_rss_bytes=peak, phase_peak_bytes={"step2": peak},
                  phase_swap_bytes=swap, wall_seconds=wall, lora_targets=f"t{peak}")


def test_the_summary_follows_each_figures_declaration() -> None:
    """Medians (by hand), the max for swap, the first for text: as each figure is declared in records.Figures."""
    from generator.store.summary import summarize

    repeats = [_repeat(900, {"step2": 0}, 3.0), _repeat(500, {"step2": 7}, 1.0), _repeat(700, {"step2": 2}, 2.0)]
    summary = summarize(repeats)
    assert summary.peak_rss_bytes == 700 and summary.net_peak_bytes == 600  # the middle of 400, 600, 800
    assert (summary.net_peak_min_bytes, summary.net_peak_max_bytes) == (400, 800)
    assert summary.phase_peak_bytes == {"step2": 700} and summary.wall_seconds == 2.0
    assert summary.phase_swap_bytes == {"step2": 7}  # declared MAX: any swapping at all is worth knowing
    assert summary.lora_targets == "t900"  # declared FIRST


def test_every_declared_figure_round_trips_through_the_codec(tmp_path: Path) -> None:
    from dataclasses import replace

    from generator.store.codec import save
    from generator.store.records import declared

    result = load_file(next(p for p in (Path(__file__).parent.parent / "measurements").rglob("train-b8-s256.toml")))
    assert {spec.name for spec in declared()} <= set(tomllib.loads(to_toml(result))["result"])
    changed = replace(result, summary=replace(result.summary, phase_swap_bytes={"step2": 4096}))
    assert load_file(save(changed, tmp_path)).summary.phase_swap_bytes == {"step2": 4096}


def test_a_schema_1_file_is_upgraded_in_one_place(measured_folder: Path, tmp_path: Path) -> None:
    """What schema 1 allowed: no method_version (method 1) and LoRA targets in [row]."""
    document = tomllib.loads((measured_folder / "train-b8-s256-lora8.toml").read_text())
    document["schema_version"] = 1
    del document["method_version"], document["method_hash"]
    document["row"]["lora_targets"] = ["q_proj", "v_proj"]
    document["result"]["lora_targets"] = ""
    path = tmp_path / "train-b8-s256-lora8.toml"
    path.write_text(tomli_w.dumps(document))
    result = load_file(path)
    assert (result.schema_version, result.method_version, result.method_hash) == (SCHEMA_VERSION, 1, "")
    assert result.summary.lora_targets == "q_proj v_proj"


def test_an_environment_key_added_later_leaves_old_files_readable(measured_folder: Path, tmp_path: Path) -> None:
    document = tomllib.loads((measured_folder / "train-b8-s256.toml").read_text())
    del document["environment"]["cpu_features"], document["environment"]["os"]
    path = tmp_path / "train-b8-s256.toml"
    path.write_text(tomli_w.dumps(document))
    environment = load_file(path).environment
    assert environment.cpu_features == "" and environment.os == "unknown"


def test_results_record_the_measuring_codes_hash(measured_folder: Path) -> None:
    from generator.measure.method import method_hash

    hashes = {load_file(path).method_hash for path in measured_folder.glob("[!_]*.toml")}
    assert hashes == {method_hash()} and len(method_hash()) == 12


def test_a_change_to_the_measuring_code_changes_its_hash(monkeypatch: pytest.MonkeyPatch) -> None:
    from generator.measure import method

    before = method.method_hash()
    source = method.module_source
    monkeypatch.setattr(method, "module_source", lambda name: source(name).replace("clear_refs", "clear_ref"))
    method.method_hash.cache_clear()
    try:
        assert method.method_hash() != before
        monkeypatch.setattr(method, "module_source", lambda name: source(name) + "\n# a comment\n")
        method.method_hash.cache_clear()
        assert method.method_hash() == before  # comments and docstrings do not count
    finally:
        method.method_hash.cache_clear()
