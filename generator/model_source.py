"""Which model a row measures: the shipped SmolLM2-135M-Instruct config (random weights), another config
file, a local folder with weights, or a hub id. Resolved and checked in the parent, built in the worker."""

import hashlib
import json
import os
import socket
from collections.abc import Callable
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from urllib.parse import urlparse

from generator.escaping import one_line_error
from generator.libraries import transformers_config

DEFAULT_MODEL = "SmolLM2-135M-Instruct"
# name -> file in generator/models/ (where each came from: generator/models/README.md)
SHIPPED_MODELS = {DEFAULT_MODEL: "smollm2-135m-instruct.json", "gpt2": "gpt2.json", "Qwen2-0.5B": "qwen2-0.5b.json",
                  "Llama-3.2-1B": "llama-3.2-1b.json", "Llama-2-7b": "llama-2-7b.json"}
_BUILTIN_CONFIGS = {name.lower(): (name, file_name) for name, file_name in SHIPPED_MODELS.items()}
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                 "pytorch_model.bin.index.json")

RANDOM_INIT = "random-init"  # built from a config; peak memory does not depend on the weight values
PRETRAINED = "pretrained"  # from_pretrained on a local folder or a hub id


class ModelError(ValueError):
    """A --model value that cannot be measured."""


@dataclass(frozen=True)
class ModelSource:
    """Where the weights come from, enough for the worker to build the model."""

    name: str
    kind: str  # RANDOM_INIT | PRETRAINED
    reference: str  # what results show: the shipped config's name, a path as given, or a hub id
    location: str  # what the worker opens: an absolute path, or the hub id
    config_sha256: str
    model_type: str  # transformers' name for the architecture, e.g. "llama"
    max_positions: int = 0  # the longest sequence the config allows; 0 where it sets no limit (ALiBi models)
    lora_targets: tuple[str, ...] = ()  # --lora-targets: the modules a LoRA row adapts; () for the defaults

    @property
    def code_module(self) -> str:
        """The transformers module that defines this architecture, for the worker server to preload."""
        from transformers.models.auto.configuration_auto import model_type_to_module_name

        module = model_type_to_module_name(self.model_type)
        return f"transformers.models.{module}.modeling_{module}"


Check = Callable[[dict, str], int]  # a config file's checks: its maximum positions, or ModelError


def resolve_model(text: str | None, check: Check | None = None) -> ModelSource:
    """Turn a --model value into a checked ModelSource, or raise ModelError with a one-line reason. A config
    file's checks are check_causal_lm's, or ``check``'s: the same checks, their answer kept from an earlier
    run (generator/predict/fast/kept.py)."""
    check = check or check_causal_lm
    if text is None or text.lower() in _BUILTIN_CONFIGS:
        name, file_name = _BUILTIN_CONFIGS[(text or DEFAULT_MODEL).lower()]
        path = resources.files("generator") / "models" / file_name
        return _from_config_file(Path(str(path)), name, f"{file_name} (shipped with memory-budget)", check)
    path = Path(text).expanduser()
    if path.is_file():  # a hub-style .../<model>/config.json is named after its folder
        name = path.resolve().parent.name if path.stem == "config" and path.resolve().parent.name else path.stem
        return _from_config_file(path, name, text, check)
    if path.is_dir():
        return _from_folder(path, check)
    if _looks_like_path(text):
        raise ModelError(f"--model {text}: no such file or folder, and not a shipped config "
                         f"(shipped: {', '.join(SHIPPED_MODELS)})")
    return _from_hub(text)


def _looks_like_path(text: str) -> bool:
    return text.startswith((".", "/", "~")) or text.endswith(".json") or text.count("/") != 1


def _from_config_file(path: Path, name: str, reference: str, check: Check) -> ModelSource:
    config = _read_config(path)
    positions = check(config, str(path))
    return ModelSource(name=name, kind=RANDOM_INIT, reference=reference, location=str(path.resolve()),
                       config_sha256=config_hash(config), model_type=config["model_type"], max_positions=positions)


def _from_folder(folder: Path, check: Check) -> ModelSource:
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelError(f"--model {folder}: the folder has no config.json")
    config = _read_config(config_path)
    positions = check(config, str(folder))
    has_weights = any((folder / name).exists() for name in _WEIGHT_FILES)
    return ModelSource(name=folder.name, kind=PRETRAINED if has_weights else RANDOM_INIT,
                       reference=str(folder), location=str((folder if has_weights else config_path).resolve()),
                       config_sha256=config_hash(config), model_type=config["model_type"], max_positions=positions)


def _from_hub(repo_id: str) -> ModelSource:
    from transformers import AutoConfig  # heavy: only for hub ids

    if os.environ.get("HF_HUB_OFFLINE", "0") not in ("1", "true", "True"):
        _check_hub_reachable(repo_id)
    try:
        config = AutoConfig.from_pretrained(repo_id).to_dict()
    except (OSError, ValueError) as error:
        first_line = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        raise ModelError(f"--model {repo_id}: cannot load it from the hub: {first_line}") from None
    positions = check_causal_lm(config, repo_id)
    return ModelSource(name=repo_id.split("/")[-1], kind=PRETRAINED, reference=repo_id, location=repo_id,
                       config_sha256=config_hash(config), model_type=config["model_type"], max_positions=positions)


def _check_hub_reachable(repo_id: str) -> None:
    """Fail in one line instead of the hub client's minute of retries when there is no network."""
    endpoint = os.environ.get("HF_ENDPOINT", "https://huggingface.co")
    host = urlparse(endpoint).hostname or endpoint
    try:
        socket.getaddrinfo(host, 443)
    except OSError as error:
        raise ModelError(f"--model {repo_id}: cannot reach the hub at {host} ({error.strerror or error}); "
                         "pass a local folder or config.json instead") from None


def _read_config(path: Path) -> dict:
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ModelError(f"--model {path}: not a readable JSON config ({error})") from None
    if not isinstance(config, dict):
        raise ModelError(f"--model {path}: a config must be a JSON object")
    return config


def check_causal_lm(config: dict, where: str) -> int:
    """Refuse what is not a causal LM transformers can build; return its maximum positions (0: no limit)."""
    found = transformers_config()
    model_type = config.get("model_type")
    if model_type not in found.causal:
        raise ModelError(f"--model {where}: model_type {model_type!r} is not a causal language model "
                         "that transformers knows")
    if model_type in found.masked and not config.get("is_decoder"):
        raise ModelError(f"--model {where}: model_type {model_type!r} is an encoder (a masked language model), "
                         "not a causal one; set \"is_decoder\": true in its config to measure it as a decoder")
    _check_sizes(config, where)  # before transformers reads them, which logs its own complaints first
    fields = {key: value for key, value in config.items() if key != "model_type"}
    try:
        built = found.AutoConfig.for_model(str(model_type), **fields)
    except Exception as error:  # transformers and huggingface_hub validate with exceptions of many types
        raise ModelError(f"--model {where}: transformers cannot build its config ({one_line_error(error)})") from None
    _check_sizes(built, where)
    positions = getattr(built, "max_position_embeddings", None)
    return positions if isinstance(positions, int) and positions > 0 else 0


# The sizes every causal LM config has (transformers maps GPT-2's n_layer and the like onto the first four).
_SIZES = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads", "n_layer", "n_embd", "n_head")


def _field(config, name: str):
    """A field of a config file (a dict) or of a built config."""
    return config.get(name) if isinstance(config, dict) else getattr(config, name, None)


def _check_sizes(config, where: str) -> None:
    """Refuse a size of zero or less, in a config file or a built config: a model without layers or without a
    vocabulary has no peak to measure, and building one fails deep in torch (a vocabulary of 0) or answers with
    nonsense (no layers)."""
    for name in _SIZES:
        value = _field(config, name)
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            raise ModelError(f"--model {where}: {name} is {value}; it must be 1 or more")
    _check_heads(config, where)


def _check_heads(config, where: str) -> None:
    """Refuse key-value heads that do not divide the attention heads: each group of query heads shares one
    key-value head, and a config with 4 heads and 3 groups fails deep in attention with a size mismatch."""
    heads, groups = _field(config, "num_attention_heads"), _field(config, "num_key_value_heads")
    if isinstance(heads, int) and isinstance(groups, int) and groups > 0 and heads > 0 and heads % groups:
        raise ModelError(f"--model {where}: num_key_value_heads is {groups}, which does not divide "
                         f"num_attention_heads ({heads}); it must be one of "
                         f"{', '.join(str(n) for n in range(1, heads + 1) if heads % n == 0)}")


def check_lengths(source: ModelSource, lengths: list[int]) -> None:
    """Refuse a sequence length over the model's maximum positions: a real forward would fail or leave the
    range it was built for (GPT-2 raises an IndexError past its 1,024 positions)."""
    if not source.max_positions:
        return
    for length in lengths:
        if length > source.max_positions:
            raise ModelError(f"--model {source.reference}: a sequence of {length:,} tokens is longer than its "
                             f"{source.max_positions:,} positions that its config allows")


def check_lora_targets(source: ModelSource, targets: tuple[str, ...]) -> None:
    """Refuse --lora-targets that name no module of the model, as peft matches them (the module's name, or the
    end of its dotted path), whatever rows were asked for: a target that matches nothing is a typing slip, and
    the rows without LoRA would otherwise ignore it silently. The model is built on the meta device: no memory."""
    model = meta_model(source)
    names = [name for name, _ in model.named_modules() if name]
    missing = [target for target in targets if not any(name == target or name.endswith(f".{target}")
                                                          for name in names)]
    if missing:
        leaves = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                         if type(module).__name__ in ("Linear", "Conv1D")} - {"lm_head"})  # Conv1D: GPT-2
        raise ModelError(f"--lora-targets {','.join(missing)}: {source.name} has no module of that name "
                         f"(its linear layers: {', '.join(leaves) or 'none'})")


def from_config(source: ModelSource, config, **options):  # -> transformers.PreTrainedModel
    """AutoModelForCausalLM.from_config, where a config transformers cannot build is bad input (ModelError)."""
    from transformers import AutoModelForCausalLM

    try:
        return AutoModelForCausalLM.from_config(config, **options)
    except Exception as error:  # whatever transformers raises for a config it cannot build, as one line
        raise ModelError(f"--model {source.reference}: transformers cannot build it from its config "
                         f"({one_line_error(error)})") from None


def meta_model(source: ModelSource, config=None):  # -> transformers.PreTrainedModel
    """The model (of ``config``, else its own) built on the meta device: its modules, and no memory."""
    import torch

    with torch.device("meta"), skip_init_weights():
        return from_config(source, load_config(source) if config is None else config)


def config_hash(config: dict) -> str:
    """A stable hash of a config's content, so results name exactly which architecture they measured."""
    return hashlib.sha256(json.dumps(config, sort_keys=True).encode()).hexdigest()


def import_model_code(source: ModelSource) -> type:
    """Import the model's class, which transformers otherwise loads lazily while the model is built.

    Called before the baseline is read, so the code is part of the baseline every row subtracts and the
    load phase holds only the weights."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[source.model_type])


def dtype_argument() -> str:
    """What from_config and from_pretrained call the dtype: `dtype` from transformers 4.56 on, `torch_dtype`
    before (older releases pass an unknown `dtype` on to the config and build in fp32)."""
    import transformers

    major, minor = (int(part) for part in transformers.__version__.split(".")[:2])
    return "dtype" if (major, minor) >= (4, 56) else "torch_dtype"


def load_config(source: ModelSource):  # -> transformers.PretrainedConfig
    """The model's transformers config: from the config file, or from the folder or hub id of a pretrained one."""
    from transformers import AutoConfig

    if source.kind == PRETRAINED:
        return AutoConfig.from_pretrained(source.location)
    config_dict = json.loads(Path(source.location).read_text(encoding="utf-8"))
    return AutoConfig.for_model(config_dict.pop("model_type"), **config_dict)


def skip_init_weights():  # transformers' context that skips the weights' init
    try:
        from transformers.initialization import no_init_weights  # transformers 5
    except ImportError:
        from transformers.modeling_utils import no_init_weights  # type: ignore[attr-defined,no-redef]  # 4.x
    return no_init_weights()
