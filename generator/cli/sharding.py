"""What fit can answer here, beyond the budget: the GPUs a row is shared between (fit answers one card of
several, by simulation; measure and probe, which run on one machine, refuse a sharded row), and the set-ups
whose libraries are installed."""

import sys
from importlib.util import find_spec

from generator.answers.setups import SETUPS
from generator.cli.errors import UsageError
from generator.matrix import MAX_GPUS, RowSpec


def refuse_sharded(rows: tuple[RowSpec, ...]) -> None:
    """measure and probe run one machine: a row sharded across GPUs is refused in one line."""
    sharded = next((row for row in rows if row.sharding), None)
    if sharded is not None:
        raise UsageError(f"row {sharded.id!r} shares its state between {sharded.gpus} GPUs, which one machine "
                         "cannot measure: predict and fit simulate it")


def sharding_asked(gpus: int, sharding: str | None, target: str) -> tuple[str, int] | None:
    """fit's --gpus and --sharding, checked: None for one card, else (sharding, cards); fsdp by default."""
    if gpus == 1:
        if sharding is not None:
            raise UsageError(f"--sharding {sharding} shares state between GPUs: give --gpus 2 or more")
        return None
    if target == "cpu":
        raise UsageError(f"--gpus {gpus} shares state between GPUs: leave out --target cpu")
    if gpus > MAX_GPUS:
        raise UsageError(f"--gpus {gpus}: at most {MAX_GPUS}")
    return sharding or "fsdp", gpus


def kinds_here() -> tuple[str, ...]:
    """The set-ups fit can simulate here: those whose library is installed; each other one named on stderr."""
    missing = [setup for setup in SETUPS if setup.library and find_spec(setup.library) is None]
    for setup in missing:
        print(f"{setup.name}: not simulated, {setup.library} is not installed (pip install {setup.library})",
              file=sys.stderr)
    return tuple(setup.name for setup in SETUPS if setup not in missing)
