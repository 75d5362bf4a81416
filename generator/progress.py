"""The live display of a matrix run: overall progress with an ETA, and the running row's phase.

On a terminal it is a rich progress bar. Elsewhere (CI logs, nox output piped to a file) it prints a line
per phase change and a heartbeat every minute, so a slow row never looks hung."""

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
        self.done_estimate = 0.0
        self.rows_done = 0
        self.rows_total = 0
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

    def start(self, total_estimate: float, rows_total: int) -> None:
        """Begin a run of rows_total rows expected to take total_estimate seconds."""
        self.rows_total = rows_total
        self.task = self.progress.add_task("starting", total=max(total_estimate, 1.0), rows=f"0/{rows_total}")

    def row_started(self, row_id: str, estimate: float) -> None:
        """A row's worker is starting."""
        self.current_estimate, self.current_row, self.last_phase = estimate, row_id, ""
        self.last_line = time.monotonic()

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
            self.log(f"  {self.current_row}: {phase}{note}, {elapsed:,.0f} s elapsed")
            self.last_phase, self.last_line = phase, now

    def row_finished(self, row_id: str, status: str, net_bytes: int, wall_seconds: float, detail: str) -> None:
        """A row ended, in any status."""
        self.done_estimate += self.current_estimate
        self.rows_done += 1
        if self.task is not None:
            self.progress.update(self.task, completed=self.done_estimate, rows=f"{self.rows_done}/{self.rows_total}")
        figure = format_mib(net_bytes) if status == "ok" else f"{status.upper()} {detail}".strip()
        self.log(f"{'✓' if status == 'ok' else '✗'} {row_id}: {figure} ({wall_seconds:,.1f} s)")
