"""The categories a simulated peak splits into, declared once: what the simulation's tracker counts
(generator/predict/exact/tracker.py, and a sharded card's share of each, predict/sharding.py), the field a prediction
stores each in (``<category>_bytes``, generator/store/records.py), and the words the tool says them in."""

CATEGORIES = ("weights", "gradients", "optimizer", "activations")
WORDS = {"weights": "weights", "gradients": "gradients", "optimizer": "AdamW state",
         "activations": "activations and temporaries"}


def field(category: str) -> str:
    """The prediction's field that holds a category's bytes at the peak: 'weights' -> 'weights_bytes'."""
    return f"{category}_bytes"
