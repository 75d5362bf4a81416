"""File IO of the store: one atomic writer, one strict TOML reader, and one appender for the logs kept beside
the rows (_runs.toml, _benchmarks.toml). Nothing else in the tool opens a measurements file."""

import os
import stat
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path

import tomli_w

from generator.store.records import ResultsError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def file_mode() -> int:
    """The mode a plain new file gets here: 0666 less the umask (0644 under the usual 022), as open() gives;
    results are shared, between users of a cluster among others."""
    return 0o666 & ~_umask()


def folder_mode() -> int:
    """The mode a new folder gets here: 0777 less the umask (0755 under the usual 022)."""
    return 0o777 & ~_umask()


def shared_bits(folder: Path) -> int:
    """The group's permission bits of a shared folder (one with the setgid bit, as a team's results folder has:
    its files take the folder's group), which what the tool writes there keeps; 0 for any other folder."""
    mode = folder.stat().st_mode
    return mode & 0o070 if mode & stat.S_ISGID else 0


def make_folders(folder: Path) -> None:
    """folder and any parents it lacks; in a shared folder each new one keeps the setgid bit and the group's
    permissions (mkdir alone gives the umask's, and a team could no longer write where one member wrote first)."""
    if folder.is_dir():
        return
    make_folders(folder.parent)
    folder.mkdir(exist_ok=True)
    bits = shared_bits(folder.parent)
    if bits:
        folder.chmod(folder_mode() | bits | stat.S_ISGID)


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file or nothing: a temporary file beside it, flushed, then renamed over it (with a shared
    folder's group permissions: shared_bits). A failure (a full disk, say) names the file it was writing."""
    try:
        make_folders(path.parent)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as error:
        raise OSError(error.errno, error.strerror, str(path)) from None
    try:
        os.fchmod(handle, file_mode() | (shared_bits(path.parent) & 0o060))  # mkstemp makes it private (0600)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException as error:
        Path(temporary).unlink(missing_ok=True)
        if isinstance(error, OSError) and not error.filename:
            raise OSError(error.errno, error.strerror, str(path)) from None
        raise


def read_text(path: Path) -> str:
    """A file's text, or ResultsError naming the file."""
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ResultsError(f"{path}: cannot read it ({error})") from None


def parse_toml(text: str, path: Path) -> dict:
    """TOML text as a document, or ResultsError naming the file."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ResultsError(f"{path}: not valid TOML ({error})") from None


def read_toml(path: Path) -> dict:
    """A TOML file as a document, strictly: unreadable or invalid is a ResultsError naming the file."""
    return parse_toml(read_text(path), path)


def log_entries(path: Path, table: str, read: Callable[[Path], dict] = read_toml) -> list:
    """A log's entries, or ResultsError naming the file where it is damaged: a damaged log is refused, as any
    other damaged file is, never silently replaced (which would lose every entry it held). `read` loads it (the
    versioned loader, where the caller has one)."""
    return _entries(read(path) if path.exists() else {}, path, table)


def _entries(document: dict, path: Path, table: str) -> list:
    entries = document.get(table, [])
    if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
        raise ResultsError(f"{path}: [[{table}]] must be an array of tables; mend or move the file")
    return entries


def append_to_log(path: Path, table: str, entry: dict, read: Callable[[Path], dict] = read_toml) -> None:
    """Append one entry to the array `table` of a log file, keeping every other table it holds (a benchmark
    file holds predict's, fit's and the sensitivity study's side by side). The file is read once; a damaged one
    is refused before anything is written."""
    document = read(path) if path.exists() else {}
    write_atomic(path, tomli_w.dumps({**document, table: [*_entries(document, path, table), entry]}))
