"""Memory caps for a worker: a cgroup v2 memory.max where this machine lets us create one, otherwise
RLIMIT_DATA (which caps the data segment and anonymous mappings, so torch's allocations fail with a
catchable error instead of the process being killed).

A cap means resident memory, the quantity every row reports. RLIMIT_DATA counts private writable address
space instead, some of which a freshly forked worker holds without using it (and some of its resident memory,
the libraries' code, is not data). So the worker sets the limit to the cap plus VmData − VmRSS as it starts:
from then on, data the worker allocates and touches counts against the cap byte for byte."""

import contextlib
import os
import resource
from dataclasses import dataclass
from pathlib import Path

from generator.measure.peak import status_bytes

CGROUP = "cgroup v2 memory.max"
RLIMIT = "RLIMIT_DATA"


@dataclass(frozen=True)
class MemoryLimit:
    """A cap on one worker process, and how it is applied."""

    n_bytes: int
    method: str
    cgroup: Path | None = None

    def apply_in_child(self) -> None:
        """Runs in the forked child before exec: join the cgroup, or set the resource limit."""
        if self.cgroup is not None:
            (self.cgroup / "cgroup.procs").write_text(str(os.getpid()))
        else:
            offset = (status_bytes("VmData") or 0) - (status_bytes("VmRSS") or 0)
            limit = max(self.n_bytes + offset, 1)
            resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))

    def oom_killed(self) -> bool:
        """Whether the kernel's OOM killer ended a process of this cgroup."""
        if self.cgroup is None:
            return False
        try:
            events = (self.cgroup / "memory.events").read_text()
        except OSError:
            return False
        counts = dict(line.split() for line in events.splitlines() if line.strip())
        return int(counts.get("oom_kill", "0")) > 0

    def release(self) -> None:
        """Remove the cgroup once its process has ended."""
        if self.cgroup is not None:
            with contextlib.suppress(OSError):  # still busy or already gone: nothing to lose
                self.cgroup.rmdir()


def _own_cgroup_v2() -> Path | None:
    """This process's cgroup v2 folder, if the unified hierarchy is mounted and has a memory controller."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
        mounts = Path("/proc/self/mounts").read_text().splitlines()
    except OSError:
        return None
    relative = next((line[3:] for line in lines if line.startswith("0::")), None)
    mount = next((line.split()[1] for line in mounts if line.split()[2:3] == ["cgroup2"]), None)
    if relative is None or mount is None:
        return None
    folder = Path(mount) / relative.lstrip("/")
    try:
        if "memory" not in (folder / "cgroup.subtree_control").read_text().split():
            return None
    except OSError:
        return None
    return folder


def memory_limit(n_bytes: int, name: str) -> MemoryLimit:
    """A cap for one worker: a fresh child cgroup where possible, else RLIMIT_DATA."""
    parent = _own_cgroup_v2()
    if parent is not None:
        child = parent / f"memory-budget-{os.getpid()}-{name}"
        try:
            child.mkdir(exist_ok=True)
            (child / "memory.max").write_text(str(n_bytes))
            (child / "memory.swap.max").write_text("0")
            return MemoryLimit(n_bytes, CGROUP, child)
        except OSError:
            MemoryLimit(n_bytes, CGROUP, child).release()
    return MemoryLimit(n_bytes, RLIMIT)
