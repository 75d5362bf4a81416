"""Everything about the machine and libraries a result depends on, gathered in one place.

The environment id names the folder under measurements/: it is derived only from what changes
the figures (library versions, device, CPU, memory), so reruns on the same set-up land beside each other
and a library upgrade lands in a new folder that `diff` can compare."""

import hashlib
import os
import platform
import re
from dataclasses import asdict, dataclass
from importlib import metadata
from typing import Any


@dataclass(frozen=True)
class Environment:
    """Versions and hardware of one measuring set-up."""

    id: str
    python: str
    torch: str
    transformers: str
    peft: str
    device: str
    device_name: str
    cpu: str
    cpu_features: str  # the vector and matrix extensions that decide how fast fp32 and bf16 run
    cpu_count: int
    total_memory_bytes: int
    os: str
    machine: str

    def as_dict(self) -> dict:
        """Plain fields, for the TOML writer."""
        return asdict(self)


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def cpu_model() -> str:
    """The CPU's marketing name, from /proc/cpuinfo where there is one."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass  # not Linux: platform.processor() below
    return platform.processor() or platform.machine()


SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "asimd", "sve", "bf16")


def cpu_features() -> str:
    """The CPU extensions that matter for fp32 and bf16 speed, from /proc/cpuinfo ('' elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(("flags", "Features")):
                    present = set(line.split(":", 1)[1].split())
                    return " ".join(flag for flag in SPEED_FLAGS if flag in present)
    except OSError:
        pass  # not Linux: no flags to report
    return ""


def total_memory_bytes() -> int:
    """Physical memory of the machine."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 0


def cuda_device_name() -> str:
    """The GPU's name; imports torch, so only called for --device cuda."""
    import torch

    return torch.cuda.get_device_name(0)


def collect_environment(device: str = "cpu") -> Environment:
    """Gather the metadata of this machine for one device."""
    fields: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "peft": _version("peft"),
        "device": device,
        "device_name": cuda_device_name() if device == "cuda" else cpu_model(),
        "cpu": cpu_model(),
        "cpu_features": cpu_features(),
        "cpu_count": os.cpu_count() or 0,
        "total_memory_bytes": total_memory_bytes(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
    }
    return Environment(id=environment_id(fields), **fields)


def environment_id(fields: dict) -> str:
    """'cpu-torch2.13.0-transformers5.24.0-peft0.21.2-py3.11-1a2b3c': readable versions, hashed hardware."""
    hardware_keys = ("device_name", "cpu", "cpu_features", "total_memory_bytes", "machine")
    hardware = "|".join(str(fields[key]) for key in hardware_keys)
    digest = hashlib.sha256(hardware.encode()).hexdigest()[:6]
    python = ".".join(fields["python"].split(".")[:2])
    versions = f"torch{fields['torch']}-transformers{fields['transformers']}-peft{fields['peft']}-py{python}"
    return re.sub(r"[^A-Za-z0-9.-]", "_", f"{fields['device']}-{versions}-{digest}")
