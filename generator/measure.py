"""`measure`: run the rows of a matrix, one fresh worker process per repeat, one TOML file per row.

Rows already measured in this environment are skipped unless forced. Each finished row is written at once
(atomically), so a failure or Ctrl-C later in the matrix loses nothing. A run that measured anything also
appends to `_runs.toml` the benchmark of the run itself: server start-up, matrix wall time, and each row's
start-up, model construction and step times."""

import time
import tomllib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import tomli_w

from generator.environment import Environment, collect_environment
from generator.lock import folder_lock
from generator.matrix import RowSpec
from generator.model_source import ModelSource
from generator.progress import MatrixDisplay
from generator.results import ModelInfo, RowResult, load_file, save, summarize, write_atomic
from generator.runner import DEFAULT_TIMEOUT_SECONDS, Job, WorkerServer, run_repeat

RUNS_FILE = "_runs.toml"


@dataclass(frozen=True)
class MeasureRequest:
    """What to measure and where to put it."""

    rows: tuple[RowSpec, ...]
    model: ModelSource
    output: Path
    device: str = "cpu"
    repeats: int = 1
    force: bool = False
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS


@dataclass
class MatrixReport:
    """What a run did: which rows it wrote, skipped, or saw fail."""

    folder: Path
    written: list[RowResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    interrupted: bool = False

    @property
    def failed(self) -> list[RowResult]:
        """Rows that ended in any status but ok."""
        return [result for result in self.written if not result.summary.ok]


def utc_now() -> str:
    """An ISO 8601 UTC timestamp to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def estimate_seconds(row: RowSpec, output: Path) -> float:
    """How long a row will take: its last recorded wall time in any environment, else a rough model."""
    recorded = sorted(output.glob(f"*/{row.id}.toml"), key=lambda path: path.stat().st_mtime)
    for path in reversed(recorded):
        try:
            return max(load_file(path).summary.wall_seconds, 0.5)
        except ValueError:
            continue
    per_token = {"baseline": 0.0, "inference": 0.003, "train": 0.015}[row.mode]
    slow_dtype = 30.0 if row.dtype != "float32" else 1.0  # CPUs without native bf16 emulate it
    return 1.0 + row.tokens_per_step * per_token * slow_dtype


def measure_row(request: MeasureRequest, row: RowSpec, environment: Environment, server: WorkerServer,
                display: MatrixDisplay) -> RowResult:
    """Run a row's repeats (stopping at the first failure) and return its record."""
    job = Job(row=row, model=request.model, device=request.device, timeout_seconds=request.timeout_seconds)
    repeats, limit_method = [], ""
    for _ in range(request.repeats):
        repeat, limit_method = run_repeat(job, server, row.memory_limit_bytes, on_phase=display.phase)
        repeats.append(repeat)
        if repeat.status != "ok":
            break
    counted = max(repeats, key=lambda repeat: repeat.parameters)  # a repeat that got as far as building
    model = ModelInfo(name=request.model.name, source=request.model.kind, reference=request.model.reference,
                      config_sha256=request.model.config_sha256, parameters=counted.parameters,
                      trainable_parameters=counted.trainable_parameters)
    return RowResult(row=row, model=model, environment=environment, summary=summarize(repeats, limit_method),
                     repeats=tuple(repeats), measured_at=utc_now())


def run_matrix(request: MeasureRequest, display: MatrixDisplay) -> MatrixReport:
    """Measure every requested row that is not already on disk; write each file as soon as it is done."""
    environment = collect_environment(request.device)
    folder = request.output / environment.id
    report = MatrixReport(folder=folder)
    with folder_lock(folder):
        todo = [row for row in request.rows if request.force or not (folder / f"{row.id}.toml").exists()]
        report.skipped = [row.id for row in request.rows if row not in todo]
        for row_id in report.skipped:
            display.log(f"· {row_id}: already measured in {environment.id} (use --force to redo)")
        if not todo:
            return report
        started, started_at = time.perf_counter(), utc_now()
        estimates = {row: estimate_seconds(row, request.output) for row in todo}
        display.log(f"measuring {len(todo)} row(s) of {request.model.name} into {folder}")
        server = WorkerServer(request.model)
        display.start(sum(estimates.values()), len(todo))
        try:
            for row in todo:
                display.row_started(row.id, estimates[row])
                result = measure_row(request, row, environment, server, display)
                save(result, folder)
                report.written.append(result)
                summary = result.summary
                display.row_finished(row.id, summary.status, summary.net_peak_bytes, summary.wall_seconds,
                                     f"in {summary.phase}: {summary.detail}" if summary.phase else summary.detail)
        except KeyboardInterrupt:
            report.interrupted = True
        record_run(folder, report, server.start_seconds, time.perf_counter() - started, started_at)
    return report


def record_run(folder: Path, report: MatrixReport, server_seconds: float, wall_seconds: float,
               started_at: str) -> None:
    """Append this run's timings to _runs.toml: how long it took and how much of each row was set-up."""
    rows = {}
    for result in report.written:
        summary = result.summary
        rows[result.row.id] = {
            "status": summary.status,
            "startup_seconds": round(summary.startup_seconds, 3),
            "load_seconds": round(summary.load_seconds, 3),
            "steps_seconds": round(summary.steps_seconds, 3),
            "wall_seconds": round(summary.wall_seconds, 3),
            "setup_share": round(summary.setup_share, 4) if summary.setup_share is not None else 0.0,
        }
    run = {
        "started_at": started_at,
        "interrupted": report.interrupted,
        "server_start_seconds": round(server_seconds, 3),
        "matrix_wall_seconds": round(wall_seconds, 3),
        "rows_skipped": report.skipped,
        "rows": rows,
    }
    path = folder / RUNS_FILE
    try:
        runs = tomllib.loads(path.read_text(encoding="utf-8")).get("runs", []) if path.exists() else []
    except (OSError, tomllib.TOMLDecodeError):
        runs = []  # a damaged log is replaced rather than blocking the results it describes
    write_atomic(path, tomli_w.dumps({"runs": [*runs, run]}))
