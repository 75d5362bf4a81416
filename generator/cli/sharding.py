"""The GPUs a command is asked to share a row between: fit answers one card of several, by simulation;
measure and probe, which run on one machine, refuse a sharded row."""

from generator.cli.parser import UsageError
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
        raise UsageError(f"--gpus {gpus} shares state between GPUs: add --target gpu")
    if gpus > MAX_GPUS:
        raise UsageError(f"--gpus {gpus}: at most {MAX_GPUS}")
    return sharding or "fsdp", gpus
