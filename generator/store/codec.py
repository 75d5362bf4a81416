"""Result files as TOML: one file per row, keys sorted, written atomically, loaded strictly.

A file holds the row's coordinates ([row]), the model ([model]), the environment ([environment]), each
repeat's raw figures ([[repeats]]), the row's summary ([result]) and, once `predict --record` ran, a simulated
[prediction]. Loading checks every key's type, refuses negative byte counts and unknown statuses, and brings
older schema versions up to date first (generator/store/documents.py)."""

from collections.abc import Mapping
from dataclasses import MISSING, asdict, fields
from pathlib import Path
from typing import TypeVar

import tomli_w

from generator.coordinates import COORDINATES, LATER_FIELDS
from generator.matrix import (
    ALLOCATORS,
    DTYPES,
    MODES,
    Mode,
    RowError,
    RowSpec,
    check_row,
)
from generator.store import plausible
from generator.store.documents import RESULTS, current
from generator.store.environment import Environment
from generator.store.files import parse_toml, read_text, write_atomic
from generator.store.records import (
    STATUSES,
    CpuPart,
    CudaPart,
    ModelInfo,
    Prediction,
    Repeat,
    ResultsError,
    RowResult,
    Summary,
)

T = TypeVar("T")


def _sorted(value):
    if isinstance(value, Mapping):
        return {key: _sorted(value[key]) for key in sorted(value)}
    if isinstance(value, list | tuple):
        return [_sorted(item) for item in value]
    if isinstance(value, float):
        return round(value, 3)
    return value


def to_toml(result: RowResult) -> str:
    """The file's text: sorted keys, seconds to the millisecond, bytes as integers."""
    document = {
        "schema_version": result.schema_version,
        "method_version": result.method_version,
        "method_hash": result.method_hash,
        "tool_version": result.tool_version,
        "measured_at": result.measured_at,
        "row": {**_without_defaults(asdict(result.row), LATER_ROW_KEYS), "id": result.row.id},
        "model": asdict(result.model),
        "environment": result.environment.as_dict(),
        "result": asdict(result.summary),
        "repeats": [asdict(repeat) for repeat in result.repeats],
    }
    if result.prediction is not None:
        document["prediction"] = _without_defaults(asdict(result.prediction), LATER_PREDICTION_KEYS)
    return tomli_w.dumps(_sorted(document))


# Coordinates and figures added after files were first written, left out where they hold their default, so
# that a row without them writes the file it wrote before they existed (and reads back the same).
LATER_ROW_KEYS = LATER_FIELDS  # declared with each coordinate (generator/coordinates.py)
LATER_PREDICTION_KEYS = {"quantization_bytes": 0, "cuda_tensor_peak_bytes": 0, "cuda_phase": "", "cuda_host_bytes": 0}


def _without_defaults(table: dict, defaults: dict) -> dict:
    return {key: value for key, value in table.items() if key not in defaults or value != defaults[key]}


def save(result: RowResult, folder: Path) -> Path:
    """Write one row's file into its model folder and return the path."""
    path = folder / result.file_name
    write_atomic(path, to_toml(result))
    return path


class _Table:
    """Typed access to one TOML table, with errors that name the file and the key."""

    def __init__(self, data: object, where: str, path: Path) -> None:
        if not isinstance(data, dict):
            raise ResultsError(f"{path}: [{where}] is missing or is not a table")
        self.data, self.where, self.path = data, where, path

    def get(self, key: str, kind: type | tuple[type, ...], default: object = ...) -> object:
        if key not in self.data:
            if default is ...:
                raise ResultsError(f"{self.path}: [{self.where}] has no {key!r}")
            return default
        value = self.data[key]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(value, kind):
            raise ResultsError(f"{self.path}: [{self.where}] {key} = {value!r} is not of the expected type")
        if isinstance(value, int) and not isinstance(value, bool) and value < 0:
            raise ResultsError(f"{self.path}: [{self.where}] {key} = {value} is negative")
        return value

    def table(self, key: str) -> "_Table":
        return _Table(self.data.get(key, {}), f"{self.where}.{key}", self.path)

    def byte_map(self, key: str) -> dict[str, int]:
        sub = self.table(key)
        return {name: sub.get(name, int) for name in sub.data}  # type: ignore[misc]


_SCALAR_TYPES: dict[object, type | tuple[type, ...]] = {int: int, str: str, bool: bool, float: (int, float),
                                                         int | None: int}  # None: absent, not computed


def _fill(cls: type[T], table: _Table, overrides: Mapping[str, object] | None = None) -> T:
    """Build a dataclass from a table, checking the type of every scalar field; defaulted ones may be absent,
    and per-phase byte maps are read as {name: bytes} tables."""
    values: dict[str, object] = dict(overrides or {})
    for spec in fields(cls):  # type: ignore[arg-type]
        if spec.name in values:
            continue
        if spec.type == Mapping[str, int]:
            values[spec.name] = table.byte_map(spec.name)
        elif spec.type in _SCALAR_TYPES:
            default = ... if spec.default is MISSING else spec.default
            value = table.get(spec.name, _SCALAR_TYPES[spec.type], default)
            values[spec.name] = float(value) if spec.type is float else value  # type: ignore[arg-type]
    return cls(**values)


def parse(text: str, path: Path) -> RowResult:
    """Check and type one file's text; raise ResultsError naming the file on anything unexpected."""
    document = current(parse_toml(text, path), path, RESULTS)
    top = _Table(document, "top level", path)
    row = _check_row(_fill(RowSpec, _Table(document.get("row"), "row", path)), path)
    if path.suffix == ".toml" and path.stem != row.id:
        raise ResultsError(f"{path}: the file name does not match its row; expected {row.id}.toml")
    summary = _fill(Summary, _Table(document.get("result"), "result", path))
    if summary.status not in STATUSES:
        raise ResultsError(f"{path}: [result] status {summary.status!r} is not one of {', '.join(STATUSES)}")
    if summary.ok and row.mode != Mode.BASELINE and (
            summary.net_peak_bytes <= 0 or summary.peak_rss_bytes <= summary.baseline_bytes):
        raise ResultsError(f"{path}: [result] a finished row with no memory above its baseline is damaged "
                           f"(net_peak_bytes = {summary.net_peak_bytes}, peak_rss_bytes = {summary.peak_rss_bytes}, "
                           f"baseline_bytes = {summary.baseline_bytes})")
    result = RowResult(
        row=row,
        model=_fill(ModelInfo, _Table(document.get("model"), "model", path)),
        environment=_fill(Environment, _Table(document.get("environment"), "environment", path)),
        summary=summary,
        repeats=_parse_repeats(document.get("repeats", []), path),
        measured_at=str(top.get("measured_at", str)),
        tool_version=str(top.get("tool_version", str, "")),
        method_version=int(top.get("method_version", int)),  # type: ignore[call-overload]
        method_hash=str(top.get("method_hash", str, "")),
        prediction=_parse_prediction(document, path),
    )
    plausible.check(result, path)
    return result


def _parse_prediction(document: dict, path: Path) -> Prediction | None:
    if "prediction" not in document:
        return None
    return prediction_from_table(document["prediction"], path)


def prediction_from_table(data: object, path: Path) -> Prediction:
    """A [prediction] table, checked field by field (a result file's, or a kept simulation's), and its figures
    for plausibility (store/plausible.py)."""
    prediction = _fill(Prediction, _Table(data, "prediction", path))
    plausible.check_simulated(prediction, path, "prediction")
    return prediction


def part_from_table(data: object, program: str, path: Path) -> CpuPart | CudaPart:
    """A kept simulation's [part] table, checked field by field: the CPU program's part, or CUDA's."""
    table = _Table(data, "part", path)
    part = _fill(CpuPart, table) if program == "cpu" else _fill(CudaPart, table)
    plausible.check_simulated(part, path, "part")
    return part


def _check_row(row: RowSpec, path: Path) -> RowSpec:
    """Coordinates the tool could have measured: a known mode and dtype, sizes within the matrix's limits."""
    if row.mode not in MODES.values():
        raise ResultsError(f"{path}: [row] mode {row.mode!r} is not one of {', '.join(MODES.values())}")
    if row.dtype not in DTYPES.values():
        raise ResultsError(f"{path}: [row] dtype {row.dtype!r} is not one of {', '.join(DTYPES.values())}")
    if row.allocator not in ALLOCATORS:
        raise ResultsError(f"{path}: [row] allocator {row.allocator!r} is not one of {', '.join(ALLOCATORS)}")
    known = {c.field: c.values for c in COORDINATES if c.values and c.field != "dtype"}  # generator/coordinates.py
    for key, values in known.items():
        if getattr(row, key) not in values:
            raise ResultsError(f"{path}: [row] {key} {getattr(row, key)!r} is not one of "
                               f"{', '.join(repr(v) for v in values)}")
    if row.sharding or row.gpus != 1:  # one machine measured it: a per-card row is simulated, never measured
        raise ResultsError(f"{path}: [row] a measured row runs on one machine; sharding {row.sharding!r} on "
                           f"{row.gpus} GPUs is simulated only")
    if row.mode != Mode.BASELINE:
        try:
            check_row(row)
        except RowError as error:
            raise ResultsError(f"{path}: [row] {error}") from None
    return row


def _parse_repeats(data: object, path: Path) -> tuple[Repeat, ...]:
    if not isinstance(data, list):
        raise ResultsError(f"{path}: [[repeats]] must be an array of tables")
    repeats = []
    for index, item in enumerate(data):
        table = _Table(item, f"repeats.{index}", path)
        steps = table.get("step_seconds", list, [])
        if not all(isinstance(s, int | float) and not isinstance(s, bool) for s in steps):  # type: ignore[attr-defined]
            raise ResultsError(f"{path}: [repeats.{index}] step_seconds must be numbers")
        repeats.append(_fill(Repeat, table, {"step_seconds": tuple(float(s) for s in steps)}))  # type: ignore[attr-defined]
    return tuple(repeats)


def load_file(path: Path) -> RowResult:
    """Read and check one result file."""
    return parse(read_text(path), path)
