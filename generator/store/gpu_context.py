"""A GPU environment's measured context: what the card held for a process beside the caching allocator's
segments (generator/measure/gpu_context.py measures it), in ``<environment>/_gpu_context.toml``. The GPU kit
writes it; the pages read it to set a measured context beside the documented allowance."""

from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import tomli_w

from generator.store import documents
from generator.store.files import write_atomic
from generator.store.layout import GPU_CONTEXT_FILE
from generator.store.records import ResultsError

GPU_CONTEXT_SCHEMA_VERSION = documents.GPU_CONTEXT.version


@dataclass(frozen=True)
class GpuContext:
    """The readings of one fresh process, in bytes (-1 where one could not be read)."""

    device_name: str
    total_bytes: int
    used_before_bytes: int
    context_bytes: int  # after CUDA started, less the card's use before
    context_with_kernels_bytes: int  # after cuBLAS's kernels and workspaces, less the allocator's reserve
    driver_process_bytes: int  # nvidia-smi's figure for the process
    allocator_reserved_bytes: int
    module_loading: str
    torch: str
    cuda: str


def save(context: GpuContext, environment_folder: Path) -> Path:
    """Write the record into a GPU environment's folder."""
    path = environment_folder / GPU_CONTEXT_FILE
    write_atomic(path, tomli_w.dumps({"schema_version": GPU_CONTEXT_SCHEMA_VERSION, **asdict(context)}))
    return path


def from_readings(readings: dict, where: str) -> GpuContext:
    """The record from the probe's JSON or the file's table, every field checked for its type."""
    values: dict[str, Any] = {}
    for spec in fields(GpuContext):
        value = readings.get(spec.name)
        if spec.type is int and (not isinstance(value, int) or isinstance(value, bool) or value < -1):
            raise ResultsError(f"{where}: {spec.name} = {value!r} is not a byte count")
        if spec.type is str and not isinstance(value, str):
            raise ResultsError(f"{where}: {spec.name} = {value!r} is not text")
        values[spec.name] = value
    return GpuContext(**values)


def load(environment_folder: Path) -> GpuContext | None:
    """An environment's record, None where there is none; refuses a version it does not know."""
    path = environment_folder / GPU_CONTEXT_FILE
    if not path.is_file():
        return None
    document = documents.load(path, documents.GPU_CONTEXT)
    return from_readings(document, str(path))
