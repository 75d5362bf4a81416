"""Simulated tensor-peak curves, which the site turns into `fit` answers without simulating (the site never
imports torch), and the answers themselves.

A tensor peak depends on the model's config and the library versions, not on the machine, and for a fixed
length it is a convex, piecewise-linear function of the batch (generator/predict/curves.py). So
`fit --record` (and the main job's `refresh`) stores, per shipped config and way of running it, the tensor peak
at the batches that pin that function down, in ``measurements/<environment>/_fit.toml``, keyed by the library
versions. Any build of an environment with those versions reads the curves and answers every budget with that
environment's own process model, so an answer can never come from another process model than the page's."""

from dataclasses import asdict, dataclass, fields
from itertools import pairwise
from pathlib import Path

import tomli_w

from generator.matrix import parse_row
from generator.store import documents, layout, plausible
from generator.store.environment import Environment
from generator.store.files import write_atomic
from generator.store.layout import FIT_FILE
from generator.store.records import ResultsError

FIT_SCHEMA_VERSION = documents.FIT_TABLE.version  # the older ones: generator/store/documents.py
# and the set-ups people run. A build refuses both as stale.


@dataclass(frozen=True)
class Curve:
    """One config's tensor peak against the batch, for one way of running it, at one length."""

    model: str
    config_sha256: str
    parameters: int
    setup: str  # the set-up's id (generator/answers/setups.py), the file's key; its name is presentation only
    row: str  # the row id with {b} for the batch: "train-b{b}-s1024-ckpt"
    batches: tuple[int, ...]
    tensor_bytes: tuple[int, ...]
    cuda_bytes: tuple[int, ...] = ()  # what the CUDA caching allocator would reserve (simulated), per batch

    @property
    def seq_len(self) -> int:
        """The length of its rows, as the row names it."""
        return parse_row(self.row.format(b=1)).seq_len

    def at(self, batch: int) -> int:
        """The tensor peak at a batch: exact at the simulated batches, on the chord between them (on or above
        the convex curve), and along the last segment past them (affine there)."""
        return chord(self.batches, self.tensor_bytes, batch)

    def cuda_at(self, batch: int) -> int:
        """The simulated CUDA reserve at a batch, read the same way."""
        return chord(self.batches, self.cuda_bytes, batch)


def chord(batches: tuple[int, ...], values: tuple[int, ...], batch: int) -> int:
    points = list(zip(batches, values, strict=True))
    segments = list(pairwise(points))
    (b1, t1), (b2, t2) = next((s for s in segments if batch <= s[1][0]), segments[-1])
    return t1 + (t2 - t1) * (batch - b1) // (b2 - b1)


@dataclass(frozen=True)
class Simulated:
    """One simulated row of the worked example's model: its tensor peak."""

    model: str
    task: str
    row: str
    tensor_peak_bytes: int
    cuda_reserved_bytes: int = 0


@dataclass(frozen=True)
class FitTable:
    """Everything in _fit.toml."""

    libraries: str  # "torch 2.13.0, transformers 5.24.0, peft 0.21.2": what the tensor peaks depend on
    environment: str  # where they were simulated
    seq_len: int
    curves: tuple[Curve, ...]
    example: tuple[Simulated, ...]
    seconds: float = 0.0
    simulator: str = ""  # the simulator's method (predict/simulate.py METHOD): refresh redoes an older one's table
    sharded: tuple[Curve, ...] = ()  # one card's curves of a large config on several cards (sharded rows)
    other_lengths: tuple[Curve, ...] = ()  # the same configs' curves at the calculator's other lengths
    cards: tuple[int, ...] = ()  # the GPU cards (GiB) whose fit batches the curves hold; () in older tables
    search: str = ""  # the search whose batches they hold (answers/fit.py SEARCH); "" in older tables
    bitsandbytes: str = ""  # the bitsandbytes the 4-bit and 8-bit-AdamW curves ran ("" in older tables)
    setups: tuple[str, ...] = ()  # the set-up ids it was asked to simulate (() in older tables): a set-up added
    # since is missing from it, so refresh simulates it again


def libraries(environment: Environment) -> str:
    """The library versions a tensor peak depends on."""
    return f"torch {environment.torch}, transformers {environment.transformers}, peft {environment.peft}"


def save_fit(table: FitTable, folder: Path) -> Path:
    """Write the table into an environment's folder."""
    document = {"schema_version": FIT_SCHEMA_VERSION, **asdict(table)}
    path = folder / FIT_FILE
    write_atomic(path, tomli_w.dumps(document))
    return path


def typed_entry(cls: type, item: object, path: Path) -> object:
    if not isinstance(item, dict):
        raise ResultsError(f"{path}: an entry is not a table")
    names = {spec.name: spec.type for spec in fields(cls)}
    values = {key: value for key, value in item.items() if key in names}
    for key, value in values.items():
        expected = names[key]
        if expected == tuple[int, ...] and isinstance(value, list):
            value = values[key] = tuple(value)
            expected = tuple
        if expected is float and isinstance(value, int) and not isinstance(value, bool):
            value = values[key] = float(value)
        if not isinstance(value, expected) or isinstance(value, bool):  # type: ignore[arg-type]
            raise ResultsError(f"{path}: {key} = {value!r} is not of the expected type")
    try:
        return cls(**values)
    except TypeError as error:
        raise ResultsError(f"{path}: {error}") from None


def load_fit(folder: Path) -> FitTable | None:
    """An environment's fit table, None where there is none; refuses what it does not know."""
    path = folder / FIT_FILE
    if not path.is_file():
        return None
    document = documents.load(path, documents.FIT_TABLE)
    curves = tuple(typed_entry(Curve, item, path) for item in document.get("curves", []))
    sharded = tuple(typed_entry(Curve, item, path) for item in document.get("sharded", []))
    others = tuple(typed_entry(Curve, item, path) for item in document.get("other_lengths", []))
    example = tuple(typed_entry(Simulated, item, path) for item in document.get("example", []))
    top = {key: document.get(key) for key in ("libraries", "environment", "seq_len")}
    if not all(isinstance(document.get(key, ""), str) for key in ("simulator", "search", "bitsandbytes")):
        raise ResultsError(f"{path}: simulator, search or bitsandbytes is not text")
    cards = document.get("cards", [])
    if not isinstance(cards, list) or not all(isinstance(gib, int) and not isinstance(gib, bool) for gib in cards):
        raise ResultsError(f"{path}: cards is not a list of whole GiB")
    if not (isinstance(top["libraries"], str) and isinstance(top["environment"], str)
            and isinstance(top["seq_len"], int)):
        raise ResultsError(f"{path}: libraries, environment or seq_len is missing or mistyped")
    check_curves((*curves, *sharded, *others), path)  # type: ignore[arg-type]
    return FitTable(libraries=top["libraries"], environment=top["environment"], seq_len=top["seq_len"],
                    curves=curves, example=example,  # type: ignore[arg-type]
                    seconds=float(document.get("seconds", 0.0)), simulator=document.get("simulator", ""),
                    sharded=sharded, other_lengths=others, cards=tuple(cards),  # type: ignore[arg-type]
                    search=document.get("search", ""), bitsandbytes=document.get("bitsandbytes", ""),
                    setups=_texts(document.get("setups", []), path))


def _texts(value: object, path: Path) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ResultsError(f"{path}: setups is not a list of set-up ids")
    return tuple(value)


def check_curves(curves: tuple[Curve, ...], path: Path) -> None:
    """Refuse a curve the answers cannot read: fewer than two batches, a batch without both figures, batches
    out of order, a row that names no length, or figures no simulation makes (store/plausible.py)."""
    for c in curves:
        plausible.check_curve_figures(c.model, c.setup, c.tensor_bytes, c.cuda_bytes, path)
        if len(c.batches) < 2 or not len(c.batches) == len(c.tensor_bytes) == len(c.cuda_bytes):
            raise ResultsError(f"{path}: a curve needs two batches or more, each with its tensor peak and GPU reserve")
        if any(b2 <= b1 for b1, b2 in pairwise(c.batches)) or c.batches[0] < 1:
            raise ResultsError(f"{path}: the batches of {c.model}'s {c.setup!r} curve are not increasing from 1 up")
        try:
            c.seq_len  # noqa: B018 - parsing the row is the check
        except (ValueError, KeyError, IndexError) as error:
            raise ResultsError(f"{path}: {c.row!r} is not a row with {{b}} for its batch ({error})") from None


def find_fit(root: Path, environment: Environment) -> FitTable | None:
    """The curves simulated under this environment's library versions: its own, else another environment's
    with the same versions (tensor peaks do not depend on the machine)."""
    found = find_fit_folder(root, environment)
    return None if found is None else found[1]


def find_fit_folder(root: Path, environment: Environment) -> tuple[Path, FitTable] | None:
    """find_fit's table with the environment folder it was read from."""
    wanted = libraries(environment)
    folders = sorted((path.parent for path in layout.fit_files(root)), key=lambda folder: folder.name != environment.id)
    for folder in folders:
        table = load_fit(folder)
        if table is not None and table.libraries == wanted:
            return folder, table
    return None
