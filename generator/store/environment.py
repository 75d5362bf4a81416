"""The set-up a result was measured on: library versions and hardware, and the id derived from them.

The id names the folder under measurements/: it is derived only from what changes the figures (library
versions, device, CPU, memory), so reruns on the same set-up land beside each other and a library upgrade
lands in a new folder that `diff` can compare. Collecting these facts from the running machine is the
measure stage's job (generator/measure/environment.py); this is only the record.

Every key but the id has a default, so a key added later leaves older files readable."""

import hashlib
import re
from dataclasses import asdict, dataclass

UNKNOWN = "unknown"


@dataclass(frozen=True)
class Environment:
    """Versions and hardware of one measuring set-up."""

    id: str
    python: str = UNKNOWN
    torch: str = UNKNOWN
    transformers: str = UNKNOWN
    peft: str = UNKNOWN
    bitsandbytes: str = UNKNOWN  # the 4-bit and 8-bit-optimizer rows' library ('not installed' where absent)
    device: str = UNKNOWN
    device_name: str = UNKNOWN
    cpu: str = UNKNOWN
    cpu_features: str = ""  # the vector and matrix extensions that decide how fast fp32 and bf16 run
    cpu_count: int = 0
    total_memory_bytes: int = 0
    os: str = UNKNOWN
    machine: str = UNKNOWN
    libc: str = UNKNOWN  # 'glibc 2.36': its allocator is what the process peaks measure
    thp: str = UNKNOWN  # transparent huge pages: always, madvise or never
    packages_hash: str = UNKNOWN  # every installed distribution and version, hashed

    def as_dict(self) -> dict:
        """Plain fields, for the TOML writer."""
        return asdict(self)


HARDWARE_KEYS = ("device_name", "cpu", "cpu_features", "total_memory_bytes", "machine")


def environment_id(fields: dict) -> str:
    """'cpu-torch2.13.0-transformers5.24.0-peft0.21.2-py3.11-1a2b3c': readable versions, hashed hardware."""
    hardware = "|".join(str(fields[key]) for key in HARDWARE_KEYS)
    digest = hashlib.sha256(hardware.encode()).hexdigest()[:6]
    python = ".".join(fields["python"].split(".")[:2])
    versions = f"torch{fields['torch']}-transformers{fields['transformers']}-peft{fields['peft']}-py{python}"
    return re.sub(r"[^A-Za-z0-9.-]", "_", f"{fields['device']}-{versions}-{digest}")
