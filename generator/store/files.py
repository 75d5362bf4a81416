"""File IO of the store: one atomic writer, one strict TOML reader, and one appender for the logs kept beside
the rows (_runs.toml, _benchmarks.toml). Nothing else in the tool opens a measurements file."""

import os
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


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file or nothing: a temporary file beside it, flushed, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(handle, file_mode())  # mkstemp makes it private (0600)
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
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
