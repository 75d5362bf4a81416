"""Older result files brought up to the current schema, in one place, as asv's ``update_to_2`` does.

Each function takes a parsed document of one version and returns it at the next; ``upgrade`` applies them in
order and refuses a version it does not know (a newer tool wrote it)."""

from collections.abc import Callable
from pathlib import Path

from generator.store.records import SCHEMA_VERSION, ResultsError


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


UPGRADES: dict[int, Callable[[dict], dict]] = {1: update_to_2}


def upgrade(document: dict, path: Path) -> dict:
    """The document at SCHEMA_VERSION, or ResultsError for a version this tool does not know."""
    version = document.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ResultsError(f"{path}: [top level] schema_version = {version!r} is missing or not a whole number")
    if version > SCHEMA_VERSION or (version < SCHEMA_VERSION and version not in UPGRADES):
        age = "newer" if version > SCHEMA_VERSION else "older"
        raise ResultsError(f"{path}: schema version {version} is {age} than this tool reads "
                           f"({SCHEMA_VERSION}); use the memory-budget release that wrote it")
    while version < SCHEMA_VERSION:
        document = UPGRADES[version](document)
        version = document["schema_version"]
    return document
