"""One versioned loader for every file kind the store reads, with one policy, as asv's results loader has:
upgrade what it knows, refuse what it does not, and name the file.

Each kind declares the schema this tool writes, the older versions it brings up to date (one function a step,
as asv's ``update_to_2``), the older versions it refuses with the reason, and what a file with no
``schema_version`` means (a log, or a file a person writes, carries none). Everything else is refused: a newer
version (a newer tool wrote it) and an older one with no upgrade."""

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from generator.store.files import read_toml
from generator.store.records import SCHEMA_VERSION, ResultsError

Upgrade = Callable[[dict], dict]


@dataclass(frozen=True)
class Kind:
    """A kind of file: its schema, and how older ones are read."""

    name: str
    version: int  # the schema this tool writes
    upgrades: dict[int, Upgrade] = field(default_factory=dict)  # version -> the document at the next version
    refused: dict[int, str] = field(default_factory=dict)  # older versions not read, and why
    unversioned: int | None = None  # the version a file without schema_version is; None: it must have one


def current(document: dict, path: Path, kind: Kind) -> dict:
    """The document at its kind's version, or ResultsError naming the file and what to do."""
    version = document.get("schema_version", kind.unversioned)
    if not isinstance(version, int) or isinstance(version, bool):
        raise ResultsError(f"{path}: [top level] schema_version = {version!r} is missing or not a whole number")
    if version in kind.refused:
        raise ResultsError(f"{path}: {kind.refused[version]}")
    if version > kind.version or (version < kind.version and version not in kind.upgrades):
        age = "newer" if version > kind.version else "older"
        raise ResultsError(f"{path}: schema version {version} is {age} than this tool reads "
                           f"({kind.version}); use the memory-budget release that wrote it")
    while version < kind.version:
        document = kind.upgrades[version](document)
        version = document["schema_version"]
    return document


def load(path: Path, kind: Kind) -> dict:
    """A file of this kind, read strictly (unreadable or invalid TOML is refused) and brought up to date."""
    return current(read_toml(path), path, kind)


# ---------------------------------------------------------------- upgrades, each one step, in one place


def update_to_2(document: dict) -> dict:
    """Schema 1 -> 2: method_version becomes required (absent meant method 1), the measuring code's hash is
    recorded ('' where unknown), and LoRA targets move from [row] into [result]."""
    upgraded = {**document, "schema_version": 2}
    upgraded.setdefault("method_version", 1)
    upgraded.setdefault("method_hash", "")
    row = dict(upgraded.get("row", {})) if isinstance(upgraded.get("row"), dict) else upgraded.get("row")
    if isinstance(row, dict):
        targets = row.pop("lora_targets", None)
        result = upgraded.get("result")
        if (isinstance(result, dict) and not result.get("lora_targets") and isinstance(targets, list)
                and all(isinstance(target, str) for target in targets)):
            upgraded["result"] = {**result, "lora_targets": " ".join(targets)}
        upgraded["row"] = row
    return upgraded


# The set-ups' names that _fit.toml (schema 3) and _curves/ (schema 1) filed curves under, and the ids that
# replaced them (generator/answers/setups.py): frozen here, as an upgrade reads what older files hold.
SETUP_IDS_BEFORE = {
    "generation": "gen", "mixed-precision training": "amp", "LoRA on a bf16 base": "bf16-lora", "QLoRA": "qlora",
    "mixed precision, 8-bit AdamW": "amp-adam8", "LoRA + checkpointing": "ckpt-bf16-lora",
    "QLoRA + checkpointing": "ckpt-qlora", "LoRA on all linear layers": "alllin-lora",
    "memory-saver full fine-tune": "saver-full", "inference": "infer", "full training": "full",
    "gradient checkpointing": "ckpt", "16-bit training": "bf16", "LoRA": "lora",
    "16-bit training, checkpointed": "ckpt-bf16"}


def _setup_ids(curves: object) -> object:
    """A list of curve tables with each ``kind`` (a set-up's name) replaced by ``setup``, its id."""
    if not isinstance(curves, list):
        return curves
    return [{**{k: v for k, v in curve.items() if k != "kind"},
             "setup": SETUP_IDS_BEFORE.get(curve.get("kind"), curve.get("kind"))}  # type: ignore[arg-type]
            if isinstance(curve, dict) and "kind" in curve else curve for curve in curves]


def setup_ids(version: int) -> Upgrade:
    """Curves filed by set-up names -> by set-up ids, at schema ``version`` + 1: a legend reworded on a page then
    changes no file."""
    def upgrade(document: dict) -> dict:
        lists = {key: _setup_ids(document[key]) for key in ("curves", "sharded", "other_lengths") if key in document}
        return {**document, **lists, "schema_version": version + 1}
    return upgrade


# ---------------------------------------------------------------- the kinds

RESULTS = Kind("result", SCHEMA_VERSION, upgrades={1: update_to_2})  # a row's file (generator/store/codec.py)
# _fit.toml (generator/store/fit_table.py); 1 held answers with one process model baked in, 2 had no GPU reserve,
# 3 filed its curves by set-up names
FIT_TABLE = Kind("fit table", 4, upgrades={3: setup_ids(3)}, refused={
    version: "holds curves of an older release (no simulated GPU reserve, fewer set-ups); run `memory-budget "
             "refresh` to simulate them again" for version in (1, 2)})
# _curves/<model>.toml (generator/store/recorded_curves.py); 1 filed its curves by set-up names
RECORDED_CURVES = Kind("recorded curves", 2, upgrades={1: setup_ids(1)})
HISTORY = Kind("release history", 1)  # measurements/_history/<model>.toml (generator/store/history.py)
GPU_CONTEXT = Kind("GPU context", 1)  # _gpu_context.toml (generator/store/gpu_context.py)
LOG = Kind("log", 1, unversioned=1)  # _runs.toml and _benchmarks.toml: appended to, no version written
CLUSTER_OPTIONS = Kind("cluster options", 1, unversioned=1)  # _slurm.toml, written by a person
# the simulation cache (generator/store/simulations.py); 1 kept a whole Prediction a row, 2 a program's part
KEPT_SIMULATION = Kind("kept simulation", 2, refused={1: "holds a whole row; the cache keeps a program's part"})
KEPT_CHECK = Kind("kept config check", 1)  # a config that passed model_source's checks, in the same cache
