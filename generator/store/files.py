"""File IO of the store: one atomic writer, one strict TOML reader, and one appender for the logs kept beside
the rows (_runs.toml, _benchmarks.toml). Nothing else in the tool opens a measurements file."""

import os
import tempfile
import tomllib
from pathlib import Path

import tomli_w

from generator.store.records import ResultsError


def write_atomic(path: Path, text: str) -> None:
    """Write a whole file or nothing: a temporary file beside it, flushed, then renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
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


def append_to_log(path: Path, table: str, entry: dict) -> None:
    """Append one entry to the array `table` of a log file. A damaged log is replaced rather than blocking the
    results it describes."""
    try:
        entries = read_toml(path).get(table, []) if path.exists() else []
    except ResultsError:
        entries = []
    write_atomic(path, tomli_w.dumps({table: [*entries, entry]}))
