"""The heavy libraries a command imports, imported once with Python's cyclic collector paused, and what they made
then frozen (gc.freeze: no collection walks it again). An import of transformers (torch with it) makes about a
million objects that live as long as the process, and the collector's passes over them, as they were made and
after, took a quarter of a second of every command that reads a config. This is the gc documentation's advice for a
process that forks, as fit and predict do; the collector runs as before for everything made later."""

import functools
import gc
from types import SimpleNamespace
from typing import Any


@functools.cache
def transformers_config() -> Any:
    """transformers' config factory and its causal and masked LM names, imported once (torch with them) as the
    module says: resolve_model took 1.71 s against 1.96 s with the collector on."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        from transformers import AutoConfig
        from transformers.models.auto.modeling_auto import (
            MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
            MODEL_FOR_MASKED_LM_MAPPING_NAMES,
        )
    finally:
        gc.freeze()
        if was_on:
            gc.enable()
    return SimpleNamespace(AutoConfig=AutoConfig, causal=MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
                           masked=MODEL_FOR_MASKED_LM_MAPPING_NAMES)
