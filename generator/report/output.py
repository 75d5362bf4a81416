"""Writing a built site: build writes only what it owns.

A build keeps a manifest (``.memory-budget-manifest``) of the files it wrote. The next build replaces the folder
whole only where everything in it is its own (listed in the manifest, or, for a site built before manifests, one
of the page and chart names a build writes) or the user's to keep (``CNAME``, ``.nojekyll``, ``.git`` and the
paths listed in ``.memory-budget-keep``), which it carries across. Anything else is refused, unless --force
says to replace the folder. An output that is, holds or lies inside the measurements folder is always refused."""

import fnmatch
import os
import re
import shutil
import tempfile
from pathlib import Path

from generator.store.files import folder_mode

MANIFEST = ".memory-budget-manifest"
KEEP_LIST = ".memory-budget-keep"
ALWAYS_KEPT = ("CNAME", ".nojekyll", ".git", KEEP_LIST)  # a hosted site's own files, never a build's
# What a build before manifests wrote: the pages (Markdown and HTML) and the charts, all at the top.
_LEGACY_NAMES = re.compile(r"[a-z0-9-]+\.(md|html|svg)")


class OutputError(ValueError):
    """An output path that build must not replace."""


def _entries(output: Path) -> list[str]:
    """Every file and link under the output, as relative POSIX paths (folders are walked, not listed)."""
    found = []
    for folder, folders, files in os.walk(output):
        base = Path(folder).relative_to(output)
        links = [name for name in folders if (Path(folder) / name).is_symlink()]
        folders[:] = [name for name in folders if name not in links]
        found += [(base / name).as_posix() for name in (*files, *links)]
    return sorted(found)


def keep_patterns(output: Path) -> tuple[str, ...]:
    """What the user keeps: the always-kept names and each line of the keep-list (blank and # lines skipped)."""
    path = output / KEEP_LIST
    listed = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    lines = (line.strip().strip("/") for line in listed)
    return (*ALWAYS_KEPT, *(line for line in lines if line and not line.startswith("#")))


def is_kept(entry: str, patterns: tuple[str, ...]) -> bool:
    """Whether a relative path, or a folder above it, matches a keep pattern."""
    parts = entry.split("/")
    prefixes = ["/".join(parts[:end]) for end in range(1, len(parts) + 1)]
    return any(fnmatch.fnmatchcase(prefix, pattern) for prefix in prefixes for pattern in patterns)


def owned(output: Path) -> set[str]:
    """The files a previous build wrote: its manifest's list, or the page and chart names where a build before
    manifests left index.md and index.html; else nothing."""
    manifest = output / MANIFEST
    if manifest.is_file():
        lines = manifest.read_text(encoding="utf-8").splitlines()
        return {line for line in lines if line and not line.startswith("#")} | {MANIFEST}
    if (output / "index.md").is_file() and (output / "index.html").is_file():
        return {entry for entry in _entries(output) if _LEGACY_NAMES.fullmatch(entry)}
    return set()


def _inside(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def check_output(output: Path, measurements: Path | None = None, force: bool = False) -> None:
    """Refuse a file, the measurements folder (or one inside or around it), and a folder holding files that no
    build wrote and the user did not list to keep (unless force)."""
    if output.exists() and not output.is_dir():
        raise OutputError(f"--output {output}: is a file, not a folder")
    if measurements is not None:
        where, source = output.resolve(), measurements.resolve()
        if _inside(where, source) or _inside(source, where):
            raise OutputError(f"--output {output}: is, holds or lies inside the measurements folder {measurements}; "
                              "a build would replace the results it reads. Write the site elsewhere")
    if not output.is_dir() or force:
        return
    patterns, mine = keep_patterns(output), owned(output)
    foreign = [entry for entry in _entries(output) if entry not in mine and not is_kept(entry, patterns)]
    if foreign:
        shown = ", ".join(foreign[:3]) + (f" and {len(foreign) - 3} more" if len(foreign) > 3 else "")
        raise OutputError(f"--output {output}: holds files memory-budget did not write ({shown}); list them in "
                          f"{KEEP_LIST} to keep them across builds, or pass --force to replace the folder")


def manifest_text(names: list[str]) -> str:
    """The manifest: the files this build wrote, one a line."""
    return "# written by memory-budget build: the next build replaces these files\n" + "".join(
        f"{name}\n" for name in names)


def _carry_kept(old: Path, staging: Path, written: set[str]) -> None:
    """Copy the user's kept files and folders from the old output into the new one (never over a built file)."""
    patterns = keep_patterns(old)
    for entry in _entries(old):
        if is_kept(entry, patterns) and entry not in written:
            target = staging / entry
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(old / entry, target, follow_symlinks=False)


def write_site(files: dict[str, str], output: Path, measurements: Path | None = None,
               force: bool = False) -> list[Path]:
    """Replace the output folder with these files, its manifest and the user's kept files; a failure leaves the
    old folder as it was."""
    check_output(output, measurements, force)
    given, output = output, output.resolve()
    try:
        output.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{output.name}-", dir=output.parent))
    except OSError as error:
        raise OutputError(f"--output {given}: cannot write there ({error.strerror or error})") from None
    staging.chmod(folder_mode())  # mkdtemp makes it private; a site is meant to be served
    everything = {**files, MANIFEST: manifest_text(sorted(files))}
    try:
        for name, text in sorted(everything.items()):
            (staging / name).write_text(text, encoding="utf-8")
        if output.is_dir():
            _carry_kept(output, staging, set(everything))
        old = output.with_name(f".{output.name}-old")
        shutil.rmtree(old, ignore_errors=True)
        if output.exists():
            output.rename(old)
        staging.rename(output)
        shutil.rmtree(old, ignore_errors=True)
    except OSError as error:
        shutil.rmtree(staging, ignore_errors=True)
        raise OutputError(f"--output {given}: cannot write there ({error.strerror or error})") from None
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return [output / name for name in sorted(files)]
