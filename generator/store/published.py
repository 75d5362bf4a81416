"""Published GPU peaks: ``measurements/_published/<source>.toml``, each a source's figures with the recipe it
states, its configs beside them (``configs/``), and ``_predicted.toml``, what the simulator answered for each
entry (written by `memory-budget published --record`, read by `build`, which imports no torch).

Persistence only: loading checks every field and names the file and the entry it refuses; the judgement (error,
band, QLoRA's allowance) is generator/answers/published.py."""

import hashlib
import json
import re
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from pathlib import Path

import tomli_w

from generator.store import layout
from generator.store.files import read_toml, write_atomic
from generator.store.records import ResultsError

FOLDER = "_published"
PREDICTED_FILE = "_predicted.toml"
FORMAT = 1
UNITS = {"GB": 10**9, "GiB": 2**30}  # a source's unit: LitGPT's "GB" is 10⁹ bytes, the guide's GiB 1024³
DEFAULT_BAND = (-0.05, 0.10)  # an entry agrees where its prediction is within -5 % / +10 % of the figure
_SOURCE_FIELDS = ("title", "repository", "path", "commit", "url", "statistic", "unit", "data", "program")
_ENTRY_FIELDS = ("id", "config", "hub", "row", "machine", "recipe", "published")
_URL = re.compile(r"^https://[^\s()<>\\]+$")  # a link's target on the page: no space, bracket or backslash


@dataclass(frozen=True)
class Source:
    """Where a set of figures was published, and what it measured."""

    file: str  # the suite file's name
    title: str
    repository: str
    path: str
    commit: str  # "" where the source is a page with no commit
    url: str
    statistic: str  # what the figure is: "torch.cuda.max_memory_allocated() ..."
    unit: str  # a key of UNITS
    data: str
    program: str  # the program the source ran, as it states it


@dataclass(frozen=True)
class Entry:
    """One published figure and the row that spells its recipe."""

    id: str
    source: Source
    config: Path  # the model card's config.json, committed beside the suite
    config_digest: str  # what names that config in _predicted.toml: a prediction of an edited config is stale
    hub: str
    row: str  # a row id (generator/matrix.py)
    lora_targets: str  # "q_proj,v_proj", "" for the architecture's default
    machine: str
    recipe: str  # the recipe as the source states it
    published: str  # the figure as published, in the source's unit
    published_bytes: int
    band: tuple[float, float]
    band_reason: str  # why an entry's band is not DEFAULT_BAND; "" where it is
    differs: str  # how the source's program differs from transformers + peft, where it does
    expected: str  # "within" or "outside": the verdict the suite last found, which its test holds (a change
    # either way is news: a fix to confirm, or a regression)


def folder(measurements: Path) -> Path:
    return measurements / FOLDER


def suite_root(measurements: Path) -> Path:
    """The measurements folder to read the suite from: this one where it holds a suite, else the measurements
    shipped with the tool (store/layout.py), so that a QLoRA answer given outside a checkout still carries the
    allowance the suite sets."""
    return measurements if folder(measurements).is_dir() else layout.shipped_measurements()


def _text(table: dict, key: str, where: str) -> str:
    value = table.get(key)
    if not isinstance(value, str):
        raise ResultsError(f"{where}: {key!r} must be a string")
    return value


def _bytes(text: str, unit: str, where: str) -> int:
    try:
        value = Decimal(text)
    except InvalidOperation:
        raise ResultsError(f"{where}: published {text!r} is not a number") from None
    if not value.is_finite() or value <= 0:
        raise ResultsError(f"{where}: published {text!r} must be a positive number of {unit}")
    return int((value * UNITS[unit]).to_integral_value())


def _source(document: dict, path: Path) -> Source:
    if document.get("format") != FORMAT:
        raise ResultsError(f"{path}: format {document.get('format')!r}, this tool reads format {FORMAT}")
    fields = {key: _text(document, key, str(path)) for key in _SOURCE_FIELDS}
    if fields["unit"] not in UNITS or document.get("unit_bytes") != UNITS[fields["unit"]]:
        raise ResultsError(f"{path}: unit {fields['unit']!r} with unit_bytes {document.get('unit_bytes')!r}; "
                           f"known: {', '.join(f'{u} = {b} bytes' for u, b in UNITS.items())}")
    if not _URL.match(fields["url"]):
        raise ResultsError(f"{path}: url {fields['url']!r} must be an https address without spaces or brackets")
    return Source(file=path.name, **fields)


def _band(table: dict, where: str) -> tuple[tuple[float, float], str]:
    if "band" not in table:
        return DEFAULT_BAND, ""
    band, reason = table["band"], table.get("band_reason")
    if (not isinstance(band, list) or len(band) != 2 or not all(isinstance(v, int | float) for v in band)
            or not band[0] < 0 < band[1] or not isinstance(reason, str) or not reason):
        raise ResultsError(f"{where}: band must be [low, high] around 0 with a band_reason saying why")
    return (float(band[0]), float(band[1])), reason


def _digest(config: Path) -> str:
    return hashlib.sha256(json.dumps(json.loads(config.read_text(encoding="utf-8")),
                                     sort_keys=True).encode()).hexdigest()[:16]


def _expected(table: dict, where: str) -> str:
    expected = table.get("expected", "within")
    if expected not in ("within", "outside"):
        raise ResultsError(f"{where}: expected must be 'within' or 'outside', not {expected!r}")
    return str(expected)


def _entry(table: dict, source: Source, path: Path) -> Entry:
    where = f"{path}: entry {table.get('id')!r}"
    fields = {key: _text(table, key, where) for key in _ENTRY_FIELDS}
    config = path.parent / fields["config"]
    if config.is_symlink() or not config.is_file() or path.parent.resolve() not in config.resolve().parents:
        raise ResultsError(f"{where}: config {fields['config']!r} is not a file inside {path.parent}")
    band, reason = _band(table, where)
    return Entry(id=fields["id"], source=source, config=config, config_digest=_digest(config), hub=fields["hub"],
                 row=fields["row"],
                 lora_targets=str(table.get("lora_targets", "")), machine=fields["machine"],
                 recipe=fields["recipe"], published=fields["published"],
                 published_bytes=_bytes(fields["published"], source.unit, where), band=band, band_reason=reason,
                 differs=str(table.get("differs", "")), expected=_expected(table, where))


def load_suite(measurements: Path) -> list[Entry]:
    """Every published entry, file by file in name order; an empty list where there is no suite."""
    root = folder(measurements)
    if not root.is_dir():
        return []
    entries: list[Entry] = []
    for path in sorted(p for p in root.glob("*.toml") if not p.name.startswith(("_", "."))):
        document = read_toml(path)
        source = _source(document, path)
        tables = document.get("entry")
        if not isinstance(tables, list) or not tables:
            raise ResultsError(f"{path}: no [[entry]] tables")
        entries += [_entry(table, source, path) for table in tables]
    ids = [entry.id for entry in entries]
    if len(set(ids)) != len(ids):
        raise ResultsError(f"{root}: entry ids repeat: {sorted({i for i in ids if ids.count(i) > 1})}")
    return entries


@dataclass(frozen=True)
class Predicted:
    """What the simulator answered for one entry, under the libraries and simulator the file names."""

    id: str
    row: str
    config: str  # the config_digest of the entry's config when it was simulated
    gpu_tensor_peak_bytes: int  # the GPU program's tensor peak: what max_memory_allocated() reports
    gpu_reserved_bytes: int  # replayed through the caching allocator's rules
    error: str  # why it could not be simulated; "" where it was


@dataclass(frozen=True)
class PredictedFile:
    libraries: str  # "torch 2.13.0, transformers 5.24.0, peft 0.21.2, bitsandbytes 0.50.2"
    simulator: str  # the simulator's method (generator/predict/simulate.py METHOD)
    entries: tuple[Predicted, ...]


def write_predicted(measurements: Path, predicted: PredictedFile) -> Path:
    path = folder(measurements) / PREDICTED_FILE
    document = {"format": FORMAT, "libraries": predicted.libraries, "simulator": predicted.simulator,
                "entry": [entry.__dict__ for entry in predicted.entries]}
    write_atomic(path, tomli_w.dumps(document))
    return path


def load_predicted(measurements: Path) -> PredictedFile | None:
    path = folder(measurements) / PREDICTED_FILE
    if not path.is_file():
        return None
    document = read_toml(path)
    if document.get("format") != FORMAT:
        raise ResultsError(f"{path}: format {document.get('format')!r}, this tool reads format {FORMAT}")
    try:
        entries = tuple(Predicted(**table) for table in document.get("entry", []))
    except TypeError as error:
        raise ResultsError(f"{path}: an entry's fields are not a prediction's ({error})") from None
    for entry in entries:
        if not all(isinstance(v, int) and 0 <= v < 2**60 for v in (entry.gpu_tensor_peak_bytes,
                                                                  entry.gpu_reserved_bytes)):
            raise ResultsError(f"{path}: entry {entry.id!r}: byte counts must be integers from 0 to 1 EiB")
    return PredictedFile(libraries=_text(document, "libraries", str(path)),
                         simulator=_text(document, "simulator", str(path)), entries=entries)
