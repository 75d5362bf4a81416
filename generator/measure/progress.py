"""The live display of a matrix run: overall progress with an ETA, and the running row's phase.

On a terminal it is a rich progress bar. Elsewhere (CI logs, nox output piped to a file) it prints the
estimated total before the first row, then a line per phase change and a heartbeat every minute, each with
the repeat's place in the run (k of n) and the ETA, so a slow row never looks hung."""

import time

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    SpinnerColumn,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from generator.escaping import plain_terminal_text, terminal_text
from generator.units import format_mib

HEARTBEAT_SECONDS = 60.0


def format_duration(seconds: float) -> str:
    """'4 min 05 s', '1 h 02 min' or '12 s'."""
    seconds = max(round(seconds), 0)
    if seconds >= 3600:
        return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"
    if seconds >= 60:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds} s"


class MatrixDisplay:
    """Shows a matrix run; the total and progress are in estimated seconds, so the ETA is in seconds."""

    def __init__(self, console: Console | None = None) -> None:
        self.console = console or Console(stderr=True, soft_wrap=True)
        self.live = self.console.is_terminal
        self.progress = Progress(
            SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), TextColumn("{task.fields[rows]}"),
            TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn(),
            console=self.console, disable=not self.live, transient=False,
        )
        self.task: TaskID | None = None
        self.current_row = ""
        self.current_estimate = 0.0
        self.total_estimate = 0.0
        self.done_estimate = 0.0
        self.jobs_done = 0
        self.jobs_total = 0
        self.last_phase = ""
        self.last_line = 0.0

    def __enter__(self) -> "MatrixDisplay":
        self.progress.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.__exit__(*exc)  # type: ignore[arg-type]

    def log(self, message: str) -> None:
        """A line that stays above the bar (or in the log). It may hold values from files or the command line
        (a model's name, a failure's detail), so it is printed as text: no rich markup, no control codes."""
        self.console.print(plain_terminal_text(message), highlight=False, markup=False)

    def start(self, total_estimate: float, jobs_total: int) -> None:
        """Begin a run of jobs_total repeats expected to take total_estimate seconds."""
        self.jobs_total, self.total_estimate = jobs_total, total_estimate
        self.log(f"estimated total: {format_duration(total_estimate)} for {jobs_total} repeat(s)")
        self.task = self.progress.add_task("starting", total=max(total_estimate, 1.0), rows=f"0/{jobs_total}")

    def skip(self, estimate: float, repeats: int) -> None:
        """Planned repeats that will not run (a failed or slow row): they leave the total and the ETA."""
        if repeats <= 0:
            return
        self.total_estimate -= estimate
        self.jobs_total -= repeats
        if self.task is not None:
            self.progress.update(self.task, total=max(self.total_estimate, 1.0))

    def revise(self, seconds: float) -> None:
        """Correct the plan by this many seconds (a row's first repeat shows how long the rest will take)."""
        self.total_estimate = max(self.total_estimate + seconds, self.done_estimate)
        if self.task is not None:
            self.progress.update(self.task, total=max(self.total_estimate, 1.0))

    def row_started(self, row_id: str, estimate: float, repeat: int = 1) -> None:
        """A repeat's worker is starting."""
        self.current_estimate, self.last_phase = estimate, ""
        self.current_row = f"{row_id} (repeat {repeat})"
        self.last_line = time.monotonic()

    def eta(self, elapsed: float) -> float:
        """Seconds left: what the plan still holds, less what the running repeat has used of its share."""
        return max(self.total_estimate - self.done_estimate - min(elapsed, self.current_estimate), 0.0)

    def phase(self, phase: str, elapsed: float) -> None:
        """Called several times a second while a row runs."""
        if self.task is not None:
            description = terminal_text(f"{self.current_row} · {phase} · {elapsed:,.0f} s")
            self.progress.update(self.task, description=description,
                                 completed=self.done_estimate + min(elapsed, self.current_estimate * 0.95))
        if self.live:
            return
        now = time.monotonic()
        if phase != self.last_phase or now - self.last_line >= HEARTBEAT_SECONDS:
            note = "" if phase != self.last_phase else " (still running)"
            self.log(f"  [{self.jobs_done + 1}/{self.jobs_total}] {self.current_row}: {phase}{note}, "
                     f"{elapsed:,.0f} s elapsed, ETA {format_duration(self.eta(elapsed))}")
            self.last_phase, self.last_line = phase, now

    def row_finished(self, row_id: str, status: str, net_bytes: int, wall_seconds: float, detail: str) -> None:
        """A repeat ended, in any status."""
        self.done_estimate += self.current_estimate
        self.jobs_done += 1
        if self.task is not None:
            self.progress.update(self.task, completed=self.done_estimate, rows=f"{self.jobs_done}/{self.jobs_total}")
        figure = format_mib(net_bytes) if status == "ok" else f"{status.upper()} {detail}".strip()
        self.log(f"{'✓' if status == 'ok' else '✗'} [{self.jobs_done}/{self.jobs_total}] {self.current_row}: "
                 f"{figure} ({wall_seconds:,.1f} s)")
