"""What a card holds for a process beside the caching allocator's segments, measured in a fresh process:
`python -m generator.measure.gpu_context` prints one JSON object (the GPU kit, generator/cli/gpu_kit.py, runs it).

The card's used memory is read before CUDA starts (NVML through nvidia-smi, which needs no context), then from
the driver (``torch.cuda.mem_get_info``) once the context exists, and again after a bf16 and an fp32 matrix
product have loaded cuBLAS's kernels and made its workspaces; the caching allocator's own reserve is taken off
that last reading. Where nvidia-smi lists this process, its per-process figure is recorded too."""

import json
import os
import shutil
import subprocess
import sys


def _nvidia_smi(*query: str) -> list[list[str]]:
    """nvidia-smi's CSV answer as rows of fields ([] where it is missing or fails)."""
    if shutil.which("nvidia-smi") is None:
        return []
    try:
        text = subprocess.run(["nvidia-smi", *query, "--format=csv,noheader,nounits"], capture_output=True,
                              text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return [[field.strip() for field in line.split(",")] for line in text.splitlines() if line.strip()]


def _used_before() -> int:
    """The card's used memory before this process starts CUDA (MiB from nvidia-smi; -1 where unreadable)."""
    rows = _nvidia_smi("--query-gpu=memory.used", "-i", "0")
    return int(float(rows[0][0]) * 2**20) if rows else -1


def _driver_figure() -> int:
    """nvidia-smi's figure for this process (-1 where it does not list it, as in a container's pid namespace)."""
    for row in _nvidia_smi("--query-compute-apps=pid,used_memory"):
        if len(row) == 2 and row[0] == str(os.getpid()):
            return int(float(row[1]) * 2**20)
    return -1


def probe() -> dict:
    """The readings, in bytes."""
    before = _used_before()
    import torch

    free, total = torch.cuda.mem_get_info()
    with_context = total - free
    for dtype in (torch.bfloat16, torch.float32):
        matrix = torch.ones(1024, 1024, device="cuda", dtype=dtype)
        (matrix @ matrix).sum().item()
        del matrix
    torch.cuda.synchronize()
    free, _ = torch.cuda.mem_get_info()
    reserved = torch.cuda.memory_reserved()
    return {"device_name": torch.cuda.get_device_name(0), "total_bytes": total, "used_before_bytes": before,
            "context_bytes": with_context - before if before >= 0 else -1,
            "context_with_kernels_bytes": total - free - reserved - before if before >= 0 else -1,
            "driver_process_bytes": _driver_figure(), "allocator_reserved_bytes": reserved,
            "module_loading": os.environ.get("CUDA_MODULE_LOADING", "LAZY (PyTorch's default)"),
            "torch": torch.__version__, "cuda": str(torch.version.cuda)}


if __name__ == "__main__":
    json.dump(probe(), sys.stdout)
    sys.stdout.write("\n")
