"""`measure`: run the rows of a matrix in repeat rounds, one fresh worker process per repeat, one TOML file
per row.

Each round starts its own worker server, so the repeats of a row are as independent as separate runs: children
of one server inherit its heap and come out identical to the byte, which would hide the run-to-run noise a diff
must allow for. A row's file is rewritten (atomically) after each of its repeats, so a failure or Ctrl-C later
loses nothing that finished. Rows already measured by the current method in this environment are skipped
unless forced. A row whose first repeat took longer than SLOW_REPEAT_SECONDS gets no more repeats unless
--repeats was given, and its file says so. A run that measured anything appends its own benchmark to
`_runs.toml`: server start-ups, wall time, and each row's set-up share."""

import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from generator.matrix import DEFAULT_TIMEOUT_SECONDS, RowSpec
from generator.measure.environment import collect_environment
from generator.measure.estimate import estimate
from generator.measure.lock import folder_lock
from generator.measure.method import method_hash
from generator.measure.progress import MatrixDisplay
from generator.measure.runner import Job, WorkerServer, run_repeat
from generator.model_source import ModelSource
from generator.store import catalog, codec, layout, runlog
from generator.store.environment import Environment
from generator.store.records import ModelInfo, Repeat, RowResult
from generator.store.summary import summarize

DEFAULT_REPEATS = 3
# Above this, a default run measures a row once: on a CPU without native bf16 the 16-bit row takes ~16 min a
# repeat, and three of them would triple the matrix's wall time for a figure whose spread the fp32 rows show.
SLOW_REPEAT_SECONDS = 300.0


@dataclass(frozen=True)
class MeasureRequest:
    """What to measure and where to put it."""

    rows: tuple[RowSpec, ...]
    model: ModelSource
    output: Path
    device: str = "cpu"
    repeats: int = DEFAULT_REPEATS
    repeats_explicit: bool = False  # --repeats given: slow rows get every repeat too
    force: bool = False
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS


@dataclass
class MatrixReport:
    """What a run did: which rows it wrote, skipped, or saw fail."""

    folder: Path
    written: list[RowResult] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    interrupted: bool = False
    server_seconds: list[float] = field(default_factory=list)
    estimate_seconds: float = 0.0  # the whole run, as estimated before its first row

    @property
    def failed(self) -> list[RowResult]:
        """Rows that ended in any status but ok."""
        return [result for result in self.written if not result.summary.ok]


@dataclass
class RowRun:
    """One row's repeats so far within this run."""

    row: RowSpec
    estimate: float
    planned: int = 1  # repeats counted in the plan (1 for a row estimated over the slow-row limit)
    repeats: list[Repeat] = field(default_factory=list)
    limit_method: str = ""
    result: RowResult | None = None


def utc_now() -> str:
    """An ISO 8601 UTC timestamp to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def repeats_note(run: RowRun, request: MeasureRequest) -> str:
    """Why a row stops short of the repeats asked for ('' when it does not)."""
    first = run.repeats[0] if run.repeats else None
    if request.repeats_explicit or first is None or first.wall_seconds <= SLOW_REPEAT_SECONDS:
        return ""
    return (f"1 repeat instead of {request.repeats}: the first took {first.wall_seconds:,.0f} s, over the "
            f"{SLOW_REPEAT_SECONDS:.0f} s above which a default run measures a row once (--repeats insists)")


def wants_another(run: RowRun, request: MeasureRequest) -> bool:
    """Whether a row gets another repeat: none after a failure, nor past the count or the slow-row rule."""
    if run.repeats and run.repeats[-1].status != "ok":
        return False
    return len(run.repeats) < request.repeats and not repeats_note(run, request)


def row_result(request: MeasureRequest, run: RowRun, environment: Environment) -> RowResult:
    """The record of a row's repeats so far."""
    counted = max(run.repeats, key=lambda repeat: repeat.parameters)  # a repeat that got as far as building
    model = ModelInfo(name=request.model.name, source=request.model.kind, reference=request.model.reference,
                      config_sha256=request.model.config_sha256, parameters=counted.parameters,
                      trainable_parameters=counted.trainable_parameters)
    summary = summarize(run.repeats, run.limit_method, repeats_note(run, request))
    return RowResult(row=run.row, model=model, environment=environment, summary=summary,
                     repeats=tuple(run.repeats), measured_at=utc_now(), method_hash=method_hash())


def measure_once(request: MeasureRequest, run: RowRun, server: WorkerServer, display: MatrixDisplay,
                 environment: Environment, folder: Path) -> None:
    """One more repeat of a row in a fresh process; rewrite the row's file with every repeat so far."""
    display.row_started(run.row.id, run.estimate, len(run.repeats) + 1)
    job = Job(row=run.row, model=request.model, device=request.device, timeout_seconds=request.timeout_seconds)
    repeat, run.limit_method = run_repeat(job, server, run.row.memory_limit_bytes, on_phase=display.phase)
    run.repeats.append(repeat)
    if len(run.repeats) == 1 and repeat.status == "ok":  # the rest of the row's repeats: as long as this one
        display.revise((repeat.wall_seconds - run.estimate) * (run.planned - 1))
        run.estimate = repeat.wall_seconds
    run.result = row_result(request, run, environment)
    codec.save(run.result, folder)
    summary = run.result.summary
    display.row_finished(run.row.id, repeat.status, repeat.net_peak_bytes, repeat.wall_seconds,
                         f"in {summary.phase}: {summary.detail}" if summary.phase else summary.detail)


def run_rounds(request: MeasureRequest, runs: list[RowRun], display: MatrixDisplay, environment: Environment,
               folder: Path, report: MatrixReport) -> None:
    """Repeat rounds, each from a freshly started worker server."""
    stopped: set[RowSpec] = set()
    for _ in range(request.repeats):
        active = [run for run in runs if wants_another(run, request)]
        for run in runs:
            if run not in active and run.row not in stopped:  # finished, failed, or too slow to repeat
                stopped.add(run.row)
                left = run.planned - len(run.repeats)
                display.skip(run.estimate * left, left)
        if not active:
            return
        for allocator in dict.fromkeys(run.row.allocator for run in active):  # a server per allocator
            with WorkerServer(request.model, allocator) as server:
                report.server_seconds.append(server.start_seconds)
                for run in active:
                    if run.row.allocator == allocator:
                        measure_once(request, run, server, display, environment, folder)


def _plan(request: MeasureRequest, todo: list[RowSpec], environment: Environment, display: MatrixDisplay,
          report: MatrixReport, folder: Path) -> list[RowRun]:
    """Each row's estimate from this machine, and the total with its repeats and server start-ups. A row that a
    stopped run left with some of its repeats keeps them and is planned for the rest only."""
    planned = estimate(todo, request.model, request.output, environment, request.timeout_seconds)
    runs = []
    for row in todo:
        seconds = max(planned.seconds[row], 0.5)
        slow = seconds > SLOW_REPEAT_SECONDS and not request.repeats_explicit
        done = [] if request.force else list(catalog.partial_repeats(layout.row_path(folder, row),
                                                                     request.model.config_sha256))
        runs.append(RowRun(row, seconds, planned=max((1 if slow else request.repeats) - len(done), 1), repeats=done))
        if done:
            display.log(f"· {row.id}: completing its {len(done)} repeat(s) already measured")
    report.estimate_seconds = (sum(run.estimate * run.planned for run in runs)
                               + planned.server_seconds * request.repeats)
    display.log(f"estimated from {planned.source}")
    display.start(report.estimate_seconds, sum(run.planned for run in runs))
    return runs


def run_matrix(request: MeasureRequest, display: MatrixDisplay) -> MatrixReport:
    """Measure every requested row that is not already on disk; write each file as soon as it changes."""
    environment = collect_environment(request.device)
    folder = catalog.model_folder(request.output, environment.id, request.model.name, request.model.config_sha256)
    report = MatrixReport(folder=folder)
    with folder_lock(folder):
        runlog.check_runs(folder)
        todo = [row for row in request.rows if request.force or not catalog.is_current(
            layout.row_path(folder, row), request.model.config_sha256, request.repeats)]
        report.skipped = [row.id for row in request.rows if row not in todo]
        for row_id in report.skipped:
            display.log(f"· {row_id}: already measured in {environment.id} (use --force to redo)")
        if not todo:
            return report
        started, started_at = time.perf_counter(), utc_now()
        display.log(f"measuring {len(todo)} row(s) of {request.model.name} into {folder}, {request.repeats} "
                    "round(s), each from a fresh worker server")
        runs = _plan(request, todo, environment, display, report, folder)
        try:
            run_rounds(request, runs, display, environment, folder, report)
        except KeyboardInterrupt:
            report.interrupted = True
        report.written = [run.result for run in runs if run.result is not None]
        record_run(folder, report, time.perf_counter() - started, started_at)
    return report


def record_run(folder: Path, report: MatrixReport, wall_seconds: float, started_at: str) -> None:
    """Append this run's timings to _runs.toml: how long it took and how much of each row was set-up."""
    rows = {}
    for result in report.written:
        summary = result.summary
        rows[result.row.id] = {
            "status": summary.status,
            "repeats": len(result.repeats),
            "startup_seconds": round(summary.startup_seconds, 3),
            "load_seconds": round(summary.load_seconds, 3),
            "steps_seconds": round(summary.steps_seconds, 3),
            "wall_seconds": round(summary.wall_seconds, 3),
            "setup_share": round(summary.setup_share, 4) if summary.setup_share is not None else 0.0,
        }
    runlog.record_run(folder, {
        "started_at": started_at,
        "interrupted": report.interrupted,
        "server_start_seconds": round(sum(report.server_seconds), 3),
        "server_starts": len(report.server_seconds),
        "matrix_wall_seconds": round(wall_seconds, 3),
        "estimated_seconds": round(report.estimate_seconds, 1),
        "rows_skipped": report.skipped,
        "rows": rows,
    })


def measure_rows(request: MeasureRequest) -> MatrixReport:
    """run_matrix with the live display: what `measure`, `probe` and `fit --confirm` call."""
    with MatrixDisplay() as display:
        return run_matrix(request, display)
