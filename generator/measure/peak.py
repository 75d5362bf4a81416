"""The process's peak resident memory, as the operating system counts it.

Linux keeps the high-water mark in /proc/self/status (VmHWM) and lets a process reset it by writing 5 to
/proc/self/clear_refs, which gives a peak per phase. Elsewhere only the whole-run peak (ru_maxrss) exists."""

import resource
import sys

PER_PHASE = "VmHWM, reset per phase via /proc/self/clear_refs"
WHOLE_RUN = "ru_maxrss, whole run only (no per-phase reset on this system)"


def status_bytes(field: str) -> int | None:
    """A memory field of /proc/self/status in bytes, or None where there is no such file or field."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) * 1024  # the kernel writes kB, meaning KiB
    except OSError:
        return None
    return None


def _ru_maxrss_bytes() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024  # bytes on macOS, KiB on Linux


class PeakMeter:
    """Reads, and where possible resets, the peak resident memory of this process."""

    def __init__(self) -> None:
        self.per_phase = status_bytes("VmHWM") is not None and self._try_reset()
        self.method = PER_PHASE if self.per_phase else WHOLE_RUN

    @staticmethod
    def _try_reset() -> bool:
        try:
            with open("/proc/self/clear_refs", "w", encoding="ascii") as clear_refs:
                clear_refs.write("5")
        except OSError:
            return False
        return True

    def peak(self) -> int:
        """The peak since the last reset (or since the process began)."""
        return status_bytes("VmHWM") or _ru_maxrss_bytes()

    def reset(self) -> None:
        """Start a new phase: the peak drops to what is resident now."""
        if self.per_phase:
            self._try_reset()
