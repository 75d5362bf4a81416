"""The memory allocator a row's processes run under, set where the worker server starts: glibc reads its
tunables, and the dynamic loader its preloads, once, when a process starts, and forked workers inherit both.

- glibc: what a user's process gets. Its mmap threshold starts at 128 KiB and rises to the size of each
  mmapped block freed (up to 32 MiB), so after the first steps most tensors come from the heap, whose freed
  memory glibc keeps (trimming only the top above twice the threshold).
- glibc-tuned: the thresholds fixed at 128 KiB (setting them turns the dynamic threshold off), so every
  tensor above 128 KiB is mapped on its own and returned to the system when freed.
- jemalloc, tcmalloc: the Debian libraries (libjemalloc2, libtcmalloc-minimal4), preloaded."""

import os
from pathlib import Path

from generator.matrix import ALLOCATORS, TUNED_SETTINGS

TUNED = TUNED_SETTINGS
LIBRARIES = {"jemalloc": "libjemalloc.so.2", "tcmalloc": "libtcmalloc_minimal.so.4"}
PACKAGES = {"jemalloc": "libjemalloc2", "tcmalloc": "libtcmalloc-minimal4"}
LIBRARY_FOLDERS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib",
                   "/usr/local/lib")
# What the other allocators' settings would leave behind in a process started from this one's environment.
_CLEARED = ("LD_PRELOAD", *TUNED)


class AllocatorError(RuntimeError):
    """An allocator that cannot be loaded on this machine."""


def library_path(allocator: str) -> Path | None:
    """Where this machine has the allocator's shared library, or None."""
    name = LIBRARIES[allocator]
    return next((Path(folder) / name for folder in LIBRARY_FOLDERS if (Path(folder) / name).exists()), None)


def allocator_environment(allocator: str, base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for a process that should run under the allocator; raise AllocatorError when its
    library is not installed."""
    if allocator not in ALLOCATORS:
        raise AllocatorError(f"unknown allocator {allocator!r} (known: {', '.join(ALLOCATORS)})")
    env = {key: value for key, value in (os.environ if base is None else base).items() if key not in _CLEARED}
    if allocator == "glibc-tuned":
        env.update(TUNED)
    elif allocator in LIBRARIES:
        path = library_path(allocator)
        if path is None:
            raise AllocatorError(f"{allocator} is not installed: apt install {PACKAGES[allocator]} "
                                 f"(looked for {LIBRARIES[allocator]} in {', '.join(LIBRARY_FOLDERS)})")
        env["LD_PRELOAD"] = str(path)
    return env


def settings_in_effect() -> str:
    """What this process was started with, as a worker records it: 'LD_PRELOAD=…' or the glibc tunables."""
    keys = ("LD_PRELOAD", *TUNED)
    return " ".join(f"{key}={os.environ[key]}" for key in keys if os.environ.get(key))


def check_available(allocators: list[str]) -> None:
    """Refuse, before anything runs, an allocator this machine lacks."""
    for allocator in allocators:
        allocator_environment(allocator, base={})


def check_in_effect(allocator: str) -> str:
    """In a worker: the settings it runs with, or AllocatorError if they are not the row's allocator's."""
    settings = settings_in_effect()
    wanted = {"glibc": "", "glibc-tuned": "MALLOC_MMAP_THRESHOLD_"}.get(allocator, LIBRARIES.get(allocator, ""))
    if (not wanted and settings) or (wanted and wanted not in settings):
        raise AllocatorError(f"the worker runs with {settings or 'no allocator settings'}, not those of {allocator}")
    return settings
