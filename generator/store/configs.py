"""The shipped config a result was measured on, found by its recorded hash: the architecture facts a sentence
needs (the vocabulary, for the logits) that the result files do not carry. None for any other config."""

import json
from importlib import resources

from generator.model_source import SHIPPED_MODELS, config_hash


def shipped_config(config_sha256: str) -> dict | None:
    """The shipped config whose content hashes to config_sha256, if one does."""
    folder = resources.files("generator") / "models"
    for file_name in SHIPPED_MODELS.values():
        config = json.loads((folder / file_name).read_text(encoding="utf-8"))
        if config_hash(config) == config_sha256:
            return config
    return None


def vocabulary_size(config_sha256: str) -> int:
    """The shipped config's vocabulary size; 0 where the config is not a shipped one."""
    config = shipped_config(config_sha256)
    return int(config.get("vocab_size", 0)) if config else 0
