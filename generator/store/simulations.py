"""Simulations kept on disk, a program's part of a row to a file (the CPU's, CUDA's), so that a question asked
again (another budget, `refresh` after an interruption, the same row in `predict`) is answered without simulating
again, and a question about one target (fit --target gpu) simulates one program. A tensor peak depends only on the
config, the row, the program, the LoRA targets, the library versions and the simulator's code, and the key is made
of exactly those; a simulation under any other is simulated afresh. What is read back is the part that was written,
field for field, so an answer from the cache equals the simulation's to the byte. A CUDA part kept without its
expandable-segments reserve (fit --target gpu does not replay it) serves only questions that do not ask for it.

Where: $MEMORY_BUDGET_CACHE, else $XDG_CACHE_HOME/memory-budget, else ~/.cache/memory-budget;
MEMORY_BUDGET_CACHE=off keeps nothing. The files are the cache's own: one that cannot be read, or that holds
another key, is simulated again and written over.

A config that passed model_source's checks is kept there too (CheckKey): the checks build the config with
transformers, whose import is most of a second, so a question asked again of a checked config reads the answer of
its checks (its maximum positions) instead. A config that failed is never kept: it is checked again, and refused
in the same words."""

import hashlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import tomli_w

from generator.store import documents
from generator.store.codec import part_from_table
from generator.store.files import write_atomic
from generator.store.records import CpuPart, CudaPart, ResultsError

CACHE_SCHEMA = documents.KEPT_SIMULATION.version
OFF = "off"


@dataclass(frozen=True)
class SimulationKey:
    """Everything a simulated row's figures depend on."""

    config_sha256: str
    row: str  # the row id
    lora_targets: str  # --lora-targets, space-separated; '' for the defaults
    libraries: str  # 'torch 2.13.0, transformers 5.24.0, peft 0.21.2'
    simulator: str  # the simulator's method and the hash of its code
    program: str  # whose part: "cpu" (CpuPart) or "cuda" (CudaPart)

    def path(self, root: Path) -> Path:
        """One file a row: under a folder for the libraries and simulator, and one for the config."""
        code = hashlib.sha256(f"{self.libraries}\n{self.simulator}".encode()).hexdigest()[:16]
        targets = hashlib.sha256(self.lora_targets.encode()).hexdigest()[:8] if self.lora_targets else "default"
        return root / "simulations" / code / self.config_sha256[:32] / f"{self.row}-{targets}-{self.program}.toml"


def cache_root() -> Path | None:
    """Where simulations are kept, or None when the cache is off."""
    chosen = os.environ.get("MEMORY_BUDGET_CACHE", "")
    if chosen == OFF:
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memory-budget"


def load(key: SimulationKey) -> CpuPart | CudaPart | None:
    """The kept part of this key, or None."""
    root = cache_root()
    if root is None:
        return None
    path = key.path(root)
    try:  # not kept yet, damaged, or another version's: simulated again (a cache refuses by missing)
        document = documents.load(path, documents.KEPT_SIMULATION)
        if document.get("key") != asdict(key):
            return None
        return part_from_table(document.get("part"), key.program, path)
    except ResultsError:
        return None


def save(key: SimulationKey, part: CpuPart | CudaPart) -> None:
    """Keep a part (whole, or not at all); a cache that cannot be written is no cache, not an error."""
    root = cache_root()
    if root is None:
        return
    fields = {name: value for name, value in asdict(part).items() if value is not None}  # None: not computed
    document = {"schema_version": CACHE_SCHEMA, "key": asdict(key), "part": fields}
    try:
        write_atomic(key.path(root), tomli_w.dumps(document))
    except OSError:
        return


@dataclass(frozen=True)
class CheckKey:
    """Everything a config's checks depend on: the config, transformers' version, the checking code's hash."""

    config_sha256: str
    transformers: str
    checker: str

    def path(self, root: Path) -> Path:
        code = hashlib.sha256(f"{self.transformers}\n{self.checker}".encode()).hexdigest()[:16]
        return root / "checked" / code / f"{self.config_sha256[:32]}.toml"


def load_check(key: CheckKey) -> int | None:
    """The maximum positions of a config that passed its checks under this key, or None when not kept."""
    root = cache_root()
    if root is None:
        return None
    try:
        document = documents.load(key.path(root), documents.KEPT_CHECK)
    except ResultsError:
        return None
    positions = document.get("max_positions")
    if document.get("key") != asdict(key) or not isinstance(positions, int) or isinstance(positions, bool):
        return None
    return positions if positions >= 0 else None


def save_check(key: CheckKey, positions: int) -> None:
    """Keep a config's passed checks; as save, a cache that cannot be written is no cache."""
    root = cache_root()
    if root is None:
        return
    document = {"schema_version": documents.KEPT_CHECK.version, "key": asdict(key), "max_positions": positions}
    try:
        write_atomic(key.path(root), tomli_w.dumps(document))
    except OSError:
        return
