"""The matrix through submitit (generator/measure/cluster.py): which rows to submit, in what order, and how the
jobs' repeats become row files, each under the environment of the machine that ran it."""

import time
from pathlib import Path

from generator.measure.cluster import (
    ClusterOptions,
    JobOutcome,
    Submission,
    follow,
    make_executor,
    submit,
    with_timeout,
)
from generator.measure.environment import collect_environment
from generator.measure.estimate import estimate
from generator.measure.lock import folder_lock
from generator.measure.matrix_run import MatrixReport, MeasureRequest, RowRun, record_run, row_result, utc_now
from generator.measure.progress import MatrixDisplay
from generator.measure.runner import Job
from generator.store import catalog, codec, layout
from generator.store.environment import Environment


def _done(request: MeasureRequest, environments: list[str]) -> set[str]:
    """Rows finished by the current method in any of these environments."""
    return {row.id for row in request.rows for env in environments
            if catalog.is_current(layout.row_path(_model_folder(request, env), row), request.model.config_sha256,
                                  request.repeats)}


def _model_folder(request: MeasureRequest, environment_id: str) -> Path:
    return catalog.model_folder(request.output, environment_id, request.model.name, request.model.config_sha256)


class _Merger:
    """Repeats arriving from jobs, merged per (environment, row) and written as they come."""

    def __init__(self, request: MeasureRequest, display: MatrixDisplay, jobs: Path) -> None:
        self.request, self.display, self.jobs = request, display, jobs
        self.runs: dict[tuple[str, str], RowRun] = {}

    def __call__(self, submission: Submission, outcome: JobOutcome) -> None:
        environment, repeat = outcome.environment, outcome.repeat
        run = self.runs.setdefault((environment.id, submission.row.id), RowRun(submission.row, 0.0))
        run.repeats.append(repeat)
        run.limit_method = outcome.limit_method or run.limit_method
        run.result = row_result(self.request, run, environment)
        codec.save(run.result, _model_folder(self.request, environment.id))
        layout.remember_environment(self.jobs, environment.id)
        detail = f"in {repeat.phase}: {repeat.detail}" if repeat.phase else repeat.detail
        self.display.row_finished(submission.row.id, repeat.status, repeat.net_peak_bytes, repeat.wall_seconds,
                                  detail)


def _specs(request: MeasureRequest, rows: list, options: ClusterOptions, jobs: Path) -> list:
    """(job, cap, round, state folder) for each repeat, round by round."""
    return [(with_timeout(Job(row=row, model=request.model, device=request.device,
                              timeout_seconds=request.timeout_seconds), options),
             row.memory_limit_bytes, number, jobs / f"{row.id}-round{number}-{time.time_ns()}")
            for number in range(1, request.repeats + 1) for row in rows]


def run_cluster_matrix(request: MeasureRequest, display: MatrixDisplay, options: ClusterOptions) -> MatrixReport:
    """Submit what is missing, follow the jobs, write the rows; on Slurm as one array, else one job at a time."""
    here: Environment = collect_environment(request.device)
    jobs = layout.jobs_folder(request.output, request.model.name)
    report = MatrixReport(folder=_model_folder(request, here.id))
    with folder_lock(jobs):
        known = [here.id] if options.executor != "slurm" else layout.remembered_environments(jobs)
        done = set() if request.force else _done(request, known)
        todo = [row for row in request.rows if row.id not in done]
        report.skipped = [row.id for row in request.rows if row.id in done]
        if not todo:
            return report
        started, started_at = time.perf_counter(), utc_now()
        merge = _Merger(request, display, jobs)
        specs = _specs(request, todo, options, jobs)
        display.log(f"submitting {len(specs)} job(s) of {request.model.name} to the {options.executor} executor")
        seconds = _estimates(request, todo, here, options)
        display.start(sum(seconds[spec[0].row] for spec in specs), len(specs))
        executor = make_executor(options, jobs)
        try:
            if options.executor == "slurm":
                follow(submit(executor, specs), merge, here)
            else:  # one at a time: jobs on one machine must not share its memory
                for spec in specs:
                    display.row_started(spec[0].row.id, seconds[spec[0].row], spec[2])
                    follow(submit(executor, [spec]), merge, here)
        except KeyboardInterrupt:
            report.interrupted = True
        report.written = [run.result for run in merge.runs.values() if run.result is not None]
        if report.written:
            record_run(_folder_of(report, request), report, time.perf_counter() - started, started_at)
    return report


def _estimates(request: MeasureRequest, rows: list, here: Environment, options: ClusterOptions) -> dict:
    """Seconds per job on this machine (a job also starts its own server); none for a cluster's array."""
    if options.executor == "slurm":
        return dict.fromkeys(rows, 0.0)
    planned = estimate(rows, request.model, request.output, here, request.timeout_seconds)
    return {row: planned.seconds[row] + planned.server_seconds for row in rows}


def _folder_of(report: MatrixReport, request: MeasureRequest) -> Path:
    return _model_folder(request, report.written[0].environment.id)
