"""The worker's file protocol, declared once: the state file a worker rewrites as each phase begins, the result
file it leaves, their names in a worker's folder, and the one reader that the runner and the cluster path both use
to turn what a worker said into a repeat when it said nothing more. Files are written whole or not at all
(generator/store/files.py), so a reader never sees half of one."""

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from generator.store.files import write_atomic
from generator.store.records import Repeat

STATE_FILE = "state.json"
RESULT_FILE = "result.json"
LOG_FILE = "worker.log"
FIRST_PHASE = "imports"  # before the worker has said anything


@dataclass(frozen=True)
class WorkerState:
    """What a worker says as each phase begins: the phase, when it began, the imports baseline and the peaks of
    the phases it finished. A parent keeps this if the worker dies."""

    phase: str = FIRST_PHASE
    since: float = 0.0
    baseline_bytes: int = 0
    phase_peak_bytes: dict[str, int] = field(default_factory=dict)

    def failed(self, status: str, detail: str, wall_seconds: float = 0.0) -> Repeat:
        """The repeat of a worker that left no result: how far it got, and the peaks of the phases it finished."""
        return Repeat(status=status, phase=self.phase, detail=detail, wall_seconds=wall_seconds,
                      baseline_bytes=self.baseline_bytes, phase_peak_bytes=dict(self.phase_peak_bytes),
                      peak_rss_bytes=max([self.baseline_bytes, *self.phase_peak_bytes.values()]))


def _read(path: Path) -> dict | None:
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def write_state(folder: Path, state: WorkerState) -> None:
    write_atomic(folder / STATE_FILE, json.dumps(asdict(state)))


def read_state(folder: Path) -> WorkerState:
    """What the worker last said; a worker that has said nothing (no file yet) is still at its imports."""
    found = _read(folder / STATE_FILE) or {}
    return WorkerState(phase=str(found.get("phase", FIRST_PHASE)), since=float(found.get("since", 0.0)),
                       baseline_bytes=int(found.get("baseline_bytes", 0)),
                       phase_peak_bytes={str(k): int(v) for k, v in dict(found.get("phase_peak_bytes", {})).items()})


def write_result(folder: Path, figures: dict) -> None:
    write_atomic(folder / RESULT_FILE, json.dumps(figures))


def read_result(folder: Path) -> dict | None:
    """The figures a worker handed back, or None if it wrote none."""
    return _read(folder / RESULT_FILE)
