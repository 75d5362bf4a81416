"""How long a matrix run will take, estimated on this machine before its first row.

Rows this machine measured before (an environment folder with the same hardware digest) give their own
recorded wall times. Otherwise two calibration repeats run first, in one fresh worker server: training at batch
1 and batch 4. Their step times place a line, seconds = fixed + per-token × tokens, for a training step of this
model on this machine (the fixed part is mostly the optimizer's pass over every parameter). Every other row is
read off that line: an inference pass costs a third of a training step (no backward, which costs about twice
the forward), gradient checkpointing a further forward (× 1.15 as measured), LoRA skips the weights' gradients
(× 0.75), and 16-bit rows run as fp32 where the CPU has native bf16 and about 30 times slower where it emulates
it. Timings of other machines are not used: they carry that machine's speed and load, not this one's."""

import time
from dataclasses import dataclass
from pathlib import Path

from generator.coordinates import time_factor
from generator.matrix import Mode, RowSpec, parse_row
from generator.measure.runner import Job, WorkerServer, run_repeat
from generator.model_source import ModelSource
from generator.store import codec, layout
from generator.store.environment import Environment
from generator.store.records import ResultsError

CALIBRATION_ROWS = ("train-b1", "train-b4")
CALIBRATE_FROM_ROWS = 4  # fewer rows than this: the calibration would cost more than the estimate is worth
SERVER_START_GUESS = 5.0
NATIVE_BF16 = ("avx512_bf16", "amx_bf16", "bf16")
FACTORS = {"inference": 1 / 3, "emulated_bf16": 30.0}  # the coordinates' own: generator/coordinates.py


@dataclass(frozen=True)
class Estimate:
    """Seconds per repeat of each row, a round's server start-up, and where the figures come from."""

    seconds: dict[RowSpec, float]
    server_seconds: float
    source: str


@dataclass(frozen=True)
class StepModel:
    """A training step's seconds on this machine: fixed + per_token × tokens; and a row's set-up."""

    fixed: float
    per_token: float
    setup: float  # start-up plus model construction, per repeat
    native_bf16: bool

    def seconds(self, row: RowSpec) -> float:
        """One repeat of a row: its set-up and its steps."""
        if row.mode == Mode.BASELINE:
            return 0.5
        step = self.fixed + self.per_token * row.tokens_per_step
        factor = FACTORS["inference"] if row.mode == Mode.INFERENCE else 1.0
        factor *= time_factor(row)  # each coordinate's (generator/coordinates.py)
        factor *= FACTORS["emulated_bf16"] if row.dtype != "float32" and not self.native_bf16 else 1.0
        return self.setup + row.steps * step * factor


def _digest(environment_id: str) -> str:
    return environment_id.rsplit("-", 1)[-1]


def from_this_machine(rows: list[RowSpec], output: Path, environment: Environment) -> dict[RowSpec, float]:
    """The rows this machine has recorded before, with their wall time."""
    found = {}
    for row in rows:
        for path in reversed(layout.recorded_row_files(output, row.with_limit(0))):
            try:
                result = codec.load_file(path)
            except ResultsError:
                continue
            if _digest(result.environment.id) == _digest(environment.id) and result.summary.wall_seconds > 0:
                found[row] = result.summary.wall_seconds
                break
    return found


def calibrate(model: ModelSource, seq_len: int, environment: Environment,
              timeout_seconds: float) -> tuple[StepModel, float] | None:
    """Two calibration repeats in one fresh server: the step model, and the server's start-up seconds; None
    where a calibration repeat did not finish."""
    rows = [parse_row(row_id, seq_len) for row_id in CALIBRATION_ROWS]
    with WorkerServer(model) as server:
        repeats = [run_repeat(Job(row=row, model=model, timeout_seconds=timeout_seconds), server)[0]
                   for row in rows]
    if any(repeat.status != "ok" for repeat in repeats):
        return None
    steps = [sum(r.step_seconds) / max(len(r.step_seconds), 1) for r in repeats]
    (t1, t4), (n1, n4) = steps, [row.tokens_per_step for row in rows]
    per_token = max((t4 - t1) / (n4 - n1), 0.0)
    setup = min(r.startup_seconds + r.load_seconds for r in repeats)
    native = any(flag in environment.cpu_features.split() for flag in NATIVE_BF16)
    return StepModel(fixed=max(t1 - per_token * n1, 0.0), per_token=per_token, setup=setup,
                     native_bf16=native), server.start_seconds


def estimate(rows: list[RowSpec], model: ModelSource, output: Path, environment: Environment,
             timeout_seconds: float) -> Estimate:
    """Every row's estimate: recorded on this machine, else calibrated here (for a matrix of a few rows or
    more), else a rough per-token guess."""
    mine = from_this_machine(rows, output, environment)
    if len(mine) == len(rows):
        return Estimate(mine, SERVER_START_GUESS, "this machine's earlier runs")
    started = time.perf_counter()
    seq_len = next((row.seq_len for row in rows if row.mode != Mode.BASELINE), 256)
    calibrated = calibrate(model, seq_len, environment, timeout_seconds) if len(rows) >= CALIBRATE_FROM_ROWS else None
    if calibrated is None:
        rough = StepModel(fixed=1.0, per_token=0.015, setup=1.0, native_bf16=False)
        return Estimate({row: mine.get(row) or rough.seconds(row) for row in rows}, SERVER_START_GUESS,
                        "a rough per-token guess (no calibration for so few rows)")
    steps, server = calibrated
    seconds = {row: mine.get(row) or steps.seconds(row) for row in rows}
    return Estimate(seconds, server, f"two calibration repeats here ({', '.join(CALIBRATION_ROWS)}: "
                                     f"{time.perf_counter() - started:.0f} s, not recorded)")
