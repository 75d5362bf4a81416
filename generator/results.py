"""Result files: one TOML file per row, with a schema version, written atomically and loaded strictly.

A file holds the row's coordinates ([row]), the model ([model]), the environment ([environment]), each
repeat's raw figures ([[repeats]]) and the row's summary ([result]: the median of the repeats that finished).
All memory figures are integer bytes. The page is built from [result]."""

import os
import statistics
import tempfile
import tomllib
from collections.abc import Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import TypeVar

import tomli_w

from generator import __version__
from generator.environment import Environment
from generator.matrix import DTYPES, MODES, RowError, RowSpec, check_row

SCHEMA_VERSION = 1
# The measuring method, as asv versions a benchmark: bumped whenever the harness changes what a figure means,
# so `measure` re-measures older rows instead of skipping them and `diff` refuses to compare across methods.
#   1: every repeat of a run forked from one worker server (files without the key).
#   2: each repeat round from its own freshly started server, so repeats are independent; RssAnon and
#      RssFile recorded at the end of each phase.
METHOD_VERSION = 2
STATUSES = ("ok", "oom", "killed", "timeout", "error")
STEP1_PHASES = ("forward", "backward", "optimizer")
T = TypeVar("T")


class ResultsError(ValueError):
    """A result file or folder that cannot be used; the message names the file and the reason."""


@dataclass(frozen=True)
class ModelInfo:
    """Which model a row measured and how many of its parameters trained."""

    name: str
    source: str  # "random-init" or "pretrained"
    reference: str
    config_sha256: str
    parameters: int
    trainable_parameters: int


@dataclass(frozen=True)
class Repeat:
    """One fresh process's figures. Failed repeats keep what they had measured before failing."""

    status: str
    phase: str = ""  # the phase that was running when it failed
    detail: str = ""  # the exception's last line or the signal's name
    peak_method: str = ""
    baseline_bytes: int = 0
    peak_rss_bytes: int = 0
    phase_peak_bytes: Mapping[str, int] = field(default_factory=dict)
    phase_rss_anon_bytes: Mapping[str, int] = field(default_factory=dict)  # RssAnon at each phase's end
    phase_rss_file_bytes: Mapping[str, int] = field(default_factory=dict)  # RssFile: library pages
    startup_seconds: float = 0.0
    load_seconds: float = 0.0
    step_seconds: tuple[float, ...] = ()
    wall_seconds: float = 0.0
    cuda_max_allocated_bytes: int = 0
    cuda_max_reserved_bytes: int = 0
    parameters: int = 0  # as the worker counted them once the model was built
    trainable_parameters: int = 0
    lora_targets: str = ""  # the modules LoRA adapted, space-separated: peft's defaults for the architecture

    @property
    def net_peak_bytes(self) -> int:
        """Peak minus the imports' baseline, measured in the same process."""
        return max(self.peak_rss_bytes - self.baseline_bytes, 0)

    @classmethod
    def from_figures(cls, figures: Mapping[str, object], **overrides: object) -> "Repeat":
        """The typed side of the worker's result file: its keys are this class's field names, so a new
        figure is one field here and one assignment in the worker."""
        values = {spec.name: figures[spec.name] for spec in fields(cls) if spec.name in figures}
        if "step_seconds" in values:
            values["step_seconds"] = tuple(values["step_seconds"])  # type: ignore[arg-type]
        return cls(**{**values, **overrides})  # type: ignore[arg-type]


@dataclass(frozen=True)
class Summary:
    """The row's figures: medians over the repeats that finished, or the first failure."""

    status: str
    phase: str = ""
    detail: str = ""
    peak_rss_bytes: int = 0
    baseline_bytes: int = 0
    net_peak_bytes: int = 0
    net_peak_min_bytes: int = 0  # the spread of the independent repeats
    net_peak_max_bytes: int = 0
    repeats_note: str = ""  # why a row has fewer repeats than asked for, if it does
    phase_peak_bytes: Mapping[str, int] = field(default_factory=dict)
    phase_rss_anon_bytes: Mapping[str, int] = field(default_factory=dict)
    phase_rss_file_bytes: Mapping[str, int] = field(default_factory=dict)
    startup_seconds: float = 0.0
    load_seconds: float = 0.0
    steps_seconds: float = 0.0
    wall_seconds: float = 0.0
    memory_limit_method: str = ""  # how a cap was applied: "cgroup v2 memory.max" or "RLIMIT_DATA"
    predicted_net_bytes: int = 0  # room for `predict`: 0 means no prediction was made
    cuda_max_allocated_bytes: int = 0  # --device cuda only: torch.cuda.max_memory_allocated
    cuda_max_reserved_bytes: int = 0  # --device cuda only: torch.cuda.max_memory_reserved
    lora_targets: str = ""  # as recorded by the repeats

    @property
    def ok(self) -> bool:
        """Whether every repeat finished."""
        return self.status == "ok"

    @property
    def setup_seconds(self) -> float:
        """Start-up plus model construction: the part of a row that is not its steps."""
        return self.startup_seconds + self.load_seconds

    @property
    def setup_share(self) -> float | None:
        """Set-up as a share of the row's wall time; None when no wall time was recorded."""
        return self.setup_seconds / self.wall_seconds if self.wall_seconds > 0 else None

    def step_peaks(self) -> tuple[int, int]:
        """Whole-process peaks of step 1 (forward, backward, optimizer) and of step 2; 0 where not recorded."""
        peaks = self.phase_peak_bytes
        step1 = max((peaks[phase] for phase in STEP1_PHASES if phase in peaks), default=0)
        return step1, peaks.get("step2", 0)


@dataclass(frozen=True)
class Prediction:
    """What `predict` simulated for a row with fake tensors (generator/simulate.py): tensor storage only.
    The process peak a machine shows on top of it is modelled at build time (generator/budget.py)."""

    tensor_peak_bytes: int
    phase: str  # the phase that sets the tensor peak
    weights_bytes: int  # the split of the peak: parameters,
    gradients_bytes: int
    optimizer_bytes: int  # AdamW state,
    activations_bytes: int  # and activations and temporaries
    parameters: int
    trainable_parameters: int
    method: str
    seconds: float = 0.0
    lora_targets: str = ""
    phase_peak_bytes: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RowResult:
    """Everything one result file holds."""

    row: RowSpec
    model: ModelInfo
    environment: Environment
    summary: Summary
    repeats: tuple[Repeat, ...]
    measured_at: str
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    method_version: int = METHOD_VERSION
    prediction: Prediction | None = None  # [prediction]: simulated, never mixed into the measured [result]

    @property
    def file_name(self) -> str:
        """The file name follows from the row's coordinates."""
        return f"{self.row.id}.toml"


def _median_int(values: list[int]) -> int:
    return int(statistics.median(values))


def _median_map(maps: list[Mapping[str, int]]) -> dict[str, int]:
    keys = [key for key in maps[0] if all(key in m for m in maps)] if maps else []
    return {key: _median_int([m[key] for m in maps]) for key in keys}


def summarize(repeats: list[Repeat], memory_limit_method: str = "", repeats_note: str = "") -> Summary:
    """Medians of the finished repeats; a row with any failed repeat takes that failure's status."""
    failed = [repeat for repeat in repeats if repeat.status != "ok"]
    if failed:
        first = failed[0]
        return Summary(status=first.status, phase=first.phase, detail=first.detail,
                       peak_rss_bytes=first.peak_rss_bytes, baseline_bytes=first.baseline_bytes,
                       phase_peak_bytes=dict(first.phase_peak_bytes), startup_seconds=first.startup_seconds,
                       load_seconds=first.load_seconds, steps_seconds=sum(first.step_seconds),
                       wall_seconds=first.wall_seconds, memory_limit_method=memory_limit_method)
    nets = [r.net_peak_bytes for r in repeats]
    return Summary(
        status="ok",
        peak_rss_bytes=_median_int([r.peak_rss_bytes for r in repeats]),
        baseline_bytes=_median_int([r.baseline_bytes for r in repeats]),
        net_peak_bytes=_median_int(nets), net_peak_min_bytes=min(nets), net_peak_max_bytes=max(nets),
        repeats_note=repeats_note,
        phase_peak_bytes=_median_map([r.phase_peak_bytes for r in repeats]),
        phase_rss_anon_bytes=_median_map([r.phase_rss_anon_bytes for r in repeats]),
        phase_rss_file_bytes=_median_map([r.phase_rss_file_bytes for r in repeats]),
        startup_seconds=statistics.median(r.startup_seconds for r in repeats),
        load_seconds=statistics.median(r.load_seconds for r in repeats),
        steps_seconds=statistics.median(sum(r.step_seconds) for r in repeats),
        wall_seconds=statistics.median(r.wall_seconds for r in repeats),
        memory_limit_method=memory_limit_method,
        cuda_max_allocated_bytes=_median_int([r.cuda_max_allocated_bytes for r in repeats]),
        cuda_max_reserved_bytes=_median_int([r.cuda_max_reserved_bytes for r in repeats]),
        lora_targets=repeats[0].lora_targets,
    )


# ---------------------------------------------------------------- writing


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
    row = {**asdict(result.row), "id": result.row.id}
    document = {
        "schema_version": result.schema_version,
        "method_version": result.method_version,
        "tool_version": result.tool_version,
        "measured_at": result.measured_at,
        "row": row,
        "model": asdict(result.model),
        "environment": result.environment.as_dict(),
        "result": asdict(result.summary),
        "repeats": [asdict(repeat) for repeat in result.repeats],
    }
    if result.prediction is not None:
        document["prediction"] = asdict(result.prediction)
    return tomli_w.dumps(_sorted(document))


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file or nothing: a temporary file beside it, flushed, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def save(result: RowResult, folder: Path) -> Path:
    """Write one row's file into its environment's folder and return the path."""
    path = folder / result.file_name
    write_atomic(path, to_toml(result))
    return path


# ---------------------------------------------------------------- loading


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


_SCALAR_TYPES: dict[object, type | tuple[type, ...]] = {int: int, str: str, bool: bool, float: (int, float)}


def _fill(cls: type[T], table: _Table, overrides: Mapping[str, object] | None = None) -> T:
    """Build a dataclass from a table, checking the type of every scalar field; defaulted ones may be absent."""
    values: dict[str, object] = dict(overrides or {})
    for spec in fields(cls):  # type: ignore[arg-type]
        if spec.name in values or spec.type not in _SCALAR_TYPES:
            continue
        default = ... if spec.default is MISSING else spec.default
        value = table.get(spec.name, _SCALAR_TYPES[spec.type], default)
        values[spec.name] = float(value) if spec.type is float else value  # type: ignore[arg-type]
    return cls(**values)


def parse(text: str, path: Path) -> RowResult:
    """Check and type one file's text; raise ResultsError naming the file on anything unexpected."""
    try:
        document = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ResultsError(f"{path}: not valid TOML ({error})") from None
    top = _Table(document, "top level", path)
    version = top.get("schema_version", int)
    if version != SCHEMA_VERSION:
        age = "newer" if version > SCHEMA_VERSION else "older"  # type: ignore[operator]
        raise ResultsError(f"{path}: schema version {version} is {age} than this tool reads "
                           f"({SCHEMA_VERSION}); use the memory-budget release that wrote it")
    row = _check_row(_fill(RowSpec, _Table(document.get("row"), "row", path)), path)
    if path.suffix == ".toml" and path.stem != row.id:
        raise ResultsError(f"{path}: the file name does not match its row; expected {row.id}.toml")
    result_table = _Table(document.get("result"), "result", path)
    summary = _fill(Summary, result_table, _byte_maps(Summary, result_table))
    legacy_targets = document["row"].get("lora_targets")  # files before LoRA targets were recorded per repeat
    if not summary.lora_targets and isinstance(legacy_targets, list) and all(
            isinstance(target, str) for target in legacy_targets):
        summary = replace(summary, lora_targets=" ".join(legacy_targets))
    if summary.status not in STATUSES:
        raise ResultsError(f"{path}: [result] status {summary.status!r} is not one of {', '.join(STATUSES)}")
    return RowResult(
        row=row,
        model=_fill(ModelInfo, _Table(document.get("model"), "model", path)),
        environment=_fill(Environment, _Table(document.get("environment"), "environment", path)),
        summary=summary,
        repeats=_parse_repeats(document.get("repeats", []), path),
        measured_at=str(top.get("measured_at", str)),
        tool_version=str(top.get("tool_version", str, "")),
        method_version=int(top.get("method_version", int, 1)),  # type: ignore[call-overload]
        prediction=_parse_prediction(document, path),
    )


def _parse_prediction(document: dict, path: Path) -> Prediction | None:
    if "prediction" not in document:
        return None
    table = _Table(document["prediction"], "prediction", path)
    return _fill(Prediction, table, _byte_maps(Prediction, table))


def _byte_maps(cls: type, table: "_Table") -> dict[str, object]:
    """The {phase: bytes} tables of a dataclass, read from a TOML table (absent ones are empty)."""
    return {spec.name: table.byte_map(spec.name) for spec in fields(cls) if spec.type == Mapping[str, int]}


def _check_row(row: RowSpec, path: Path) -> RowSpec:
    """Coordinates the tool could have measured: a known mode and dtype, sizes within the matrix's limits."""
    if row.mode not in MODES.values():
        raise ResultsError(f"{path}: [row] mode {row.mode!r} is not one of {', '.join(MODES.values())}")
    if row.dtype not in DTYPES.values():
        raise ResultsError(f"{path}: [row] dtype {row.dtype!r} is not one of {', '.join(DTYPES.values())}")
    if row.mode != "baseline":
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
        overrides = {**_byte_maps(Repeat, table),
                     "step_seconds": tuple(float(s) for s in steps)}  # type: ignore[attr-defined]
        repeats.append(_fill(Repeat, table, overrides))
    return tuple(repeats)


def load_file(path: Path) -> RowResult:
    """Read and check one result file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: cannot read it ({error})") from None
    return parse(text, path)
