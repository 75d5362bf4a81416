"""The TOML schema: round trip, versioning, strict loading."""

import tomllib
from pathlib import Path

import pytest
import tomli_w

from generator.results import SCHEMA_VERSION, ResultsError, load_file, parse, to_toml


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
