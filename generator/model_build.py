"""The worker's model: built from its config with random weights (no per-module init, seconds on a CPU), or
loaded from a folder or hub id with its weights, directly in the row's dtype (generator/model_source.py resolves
and checks what it builds)."""

from generator.model_source import PRETRAINED, ModelSource, dtype_argument, load_config, skip_init_weights


def build_model(source: ModelSource, dtype):  # -> transformers.PreTrainedModel; imports kept local
    """Build or load the model in the worker, directly in the row's dtype."""
    from transformers import AutoModelForCausalLM

    if source.kind == PRETRAINED:
        return AutoModelForCausalLM.from_pretrained(source.location, **{dtype_argument(): dtype})
    config = load_config(source)
    with skip_init_weights():
        model = AutoModelForCausalLM.from_config(config, **{dtype_argument(): dtype})
    model.tie_weights()  # skipping the init also skips tying; an untied lm_head would add a whole matrix
    fill_random_weights(model, getattr(config, "initializer_range", 0.02))
    return model


def fill_random_weights(model, std: float) -> None:
    """Random weights without transformers' per-module init, which costs seconds on a CPU.

    Matrices get a uniform draw with the config's standard deviation, norms get ones, biases zeros: values
    that compute like a real model's (no NaNs, no denormals). Peak memory does not depend on them."""
    import torch

    bound = std * 3**0.5
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if parameter.dim() >= 2:
                parameter.uniform_(-bound, bound)
            elif "norm" in name:
                parameter.fill_(1.0)
            else:
                parameter.zero_()
