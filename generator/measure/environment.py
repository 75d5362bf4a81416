"""Collect the facts of this machine and its libraries that a result depends on (the record and its id
live in generator/store/environment.py)."""

import hashlib
import os
import platform
from importlib import metadata
from typing import Any

from generator.store.environment import Environment, environment_id

SPEED_FLAGS = ("avx2", "avx512f", "avx512_bf16", "amx_bf16", "asimd", "sve", "bf16")


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def _cpuinfo_value(prefixes: tuple[str, ...]) -> str | None:
    """The value of the first /proc/cpuinfo line that starts with one of the prefixes (None elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith(prefixes):
                    return line.split(":", 1)[1].strip()
    except OSError:
        return None  # not Linux
    return None


def cpu_model() -> str:
    """The CPU's marketing name, from /proc/cpuinfo where there is one."""
    return _cpuinfo_value(("model name",)) or platform.processor() or platform.machine()


def cpu_features() -> str:
    """The CPU extensions that matter for fp32 and bf16 speed, from /proc/cpuinfo ('' elsewhere)."""
    present = set((_cpuinfo_value(("flags", "Features")) or "").split())
    return " ".join(flag for flag in SPEED_FLAGS if flag in present)


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


def packages_hash() -> str:
    """A hash of every installed distribution and its version: two environments with the same torch,
    transformers and peft can still differ in what else is installed, and that moved a row by 7 % once."""
    names = sorted(f"{d.metadata['Name']}=={d.version}".lower() for d in metadata.distributions())
    return hashlib.sha256("\n".join(names).encode()).hexdigest()[:12]


def _read(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    except OSError:
        return "unknown"


def system_facts() -> dict[str, str]:
    """The C library, the transparent-huge-pages mode and the installed packages: what else moves a peak."""
    libc, version = platform.libc_ver()
    thp = _read("/sys/kernel/mm/transparent_hugepage/enabled")
    return {"libc": f"{libc} {version}".strip() or "unknown",
            "thp": next((word.strip("[]") for word in thp.split() if word.startswith("[")), thp),
            "packages_hash": packages_hash()}


def collect_environment(device: str = "cpu") -> Environment:
    """Gather the metadata of this machine for one device."""
    fields: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": _version("torch"),
        "transformers": _version("transformers"),
        "peft": _version("peft"),
        "bitsandbytes": _version("bitsandbytes"),
        "device": device,
        "device_name": cuda_device_name() if device == "cuda" else cpu_model(),
        "cpu": cpu_model(),
        "cpu_features": cpu_features(),
        "cpu_count": os.cpu_count() or 0,
        "total_memory_bytes": total_memory_bytes(),
        "os": f"{platform.system()} {platform.release()}",
        "machine": platform.machine(),
        **system_facts(),
    }
    return Environment(id=environment_id(fields), **fields)
