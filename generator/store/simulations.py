"""Simulations kept on disk, so that a question asked again (another budget, `refresh` after an interruption, the
same row in `predict`) is answered without simulating again. A tensor peak depends only on the config, the row,
the LoRA targets, the library versions and the simulator's code, and the key is made of exactly those; a
simulation under any other is simulated afresh. What is read back is the Prediction that was written, field for
field, so an answer from the cache equals the simulation's to the byte.

Where: $MEMORY_BUDGET_CACHE, else $XDG_CACHE_HOME/memory-budget, else ~/.cache/memory-budget;
MEMORY_BUDGET_CACHE=off keeps nothing. The files are the cache's own: one that cannot be read, or that holds
another key, is simulated again and written over."""

import hashlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import tomli_w

from generator.store import documents
from generator.store.codec import prediction_from_table
from generator.store.files import write_atomic
from generator.store.records import Prediction, ResultsError

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

    def path(self, root: Path) -> Path:
        """One file a row: under a folder for the libraries and simulator, and one for the config."""
        code = hashlib.sha256(f"{self.libraries}\n{self.simulator}".encode()).hexdigest()[:16]
        targets = hashlib.sha256(self.lora_targets.encode()).hexdigest()[:8] if self.lora_targets else "default"
        return root / "simulations" / code / self.config_sha256[:32] / f"{self.row}-{targets}.toml"


def cache_root() -> Path | None:
    """Where simulations are kept, or None when the cache is off."""
    chosen = os.environ.get("MEMORY_BUDGET_CACHE", "")
    if chosen == OFF:
        return None
    if chosen:
        return Path(chosen)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memory-budget"


def load(key: SimulationKey) -> Prediction | None:
    """The kept simulation of this key, or None."""
    root = cache_root()
    if root is None:
        return None
    path = key.path(root)
    try:  # not kept yet, damaged, or another version's: simulated again (a cache refuses by missing)
        document = documents.load(path, documents.KEPT_SIMULATION)
        return prediction_from_table(document.get("prediction"), path) if document.get("key") == asdict(key) else None
    except ResultsError:
        return None


def save(key: SimulationKey, prediction: Prediction) -> None:
    """Keep a simulation (whole, or not at all); a cache that cannot be written is no cache, not an error."""
    root = cache_root()
    if root is None:
        return
    document = {"schema_version": CACHE_SCHEMA, "key": asdict(key), "prediction": asdict(prediction)}
    try:
        write_atomic(key.path(root), tomli_w.dumps(document))
    except OSError:
        return
