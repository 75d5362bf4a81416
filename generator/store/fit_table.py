"""The simulated answers the site shows without simulating (the site never imports torch): `fit --record`
writes them to measurements/<environment>/_fit.toml, and build reads them back, strictly."""

from dataclasses import asdict, dataclass, fields
from pathlib import Path

import tomli_w

from generator.store.files import read_toml, write_atomic
from generator.store.layout import FIT_FILE
from generator.store.records import ResultsError

FIT_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class FitAnswer:
    """The largest batch of one kind that fits a budget, with the predictions either side of the edge."""

    kind: str
    row: str  # the row at the answer (or at batch 1 when nothing fits)
    batch: int  # 0: not even batch 1 fits
    predicted_bytes: int  # expected process peak at that batch (batch 1 when nothing fits)
    next_bytes: int  # at batch + 1; 0 when the search stopped at the largest batch the tool allows
    usable_bytes: int
    simulations: int
    model: str = ""
    parameters: int = 0
    budget_bytes: int = 0
    error: str = ""  # why this kind could not be simulated ('' when it was)


@dataclass(frozen=True)
class Simulated:
    """One simulated row of the worked example's model."""

    model: str
    task: str
    row: str
    tensor_peak_bytes: int
    peak_bytes: int  # with the process model


@dataclass(frozen=True)
class FitTable:
    """Everything in _fit.toml."""

    environment: str
    seq_len: int
    margin: float
    process_model: str
    answers: tuple[FitAnswer, ...]
    example: tuple[Simulated, ...]


def save_fit(table: FitTable, folder: Path) -> Path:
    """Write the table into an environment's folder."""
    document = {"schema_version": FIT_SCHEMA_VERSION, **asdict(table)}
    path = folder / FIT_FILE
    write_atomic(path, tomli_w.dumps(document))
    return path


def _typed(cls: type, item: object, path: Path) -> object:
    if not isinstance(item, dict):
        raise ResultsError(f"{path}: an entry is not a table")
    names = {spec.name: spec.type for spec in fields(cls)}
    values = {key: value for key, value in item.items() if key in names}
    for key, value in values.items():
        expected = names[key]
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
    document = read_toml(path)
    if document.get("schema_version") != FIT_SCHEMA_VERSION:
        raise ResultsError(f"{path}: schema version {document.get('schema_version')!r} is not {FIT_SCHEMA_VERSION}")
    answers = tuple(_typed(FitAnswer, item, path) for item in document.get("answers", []))
    example = tuple(_typed(Simulated, item, path) for item in document.get("example", []))
    environment, seq_len, margin, model = (document.get(key) for key in ("environment", "seq_len", "margin",
                                                                         "process_model"))
    if not (isinstance(environment, str) and isinstance(seq_len, int) and isinstance(margin, int | float)
            and isinstance(model, str)):
        raise ResultsError(f"{path}: environment, seq_len, margin or process_model is missing or mistyped")
    return FitTable(environment=environment, seq_len=seq_len, margin=float(margin), process_model=model,
                    answers=answers, example=example)  # type: ignore[arg-type]
