"""memory-budget: measure peak memory of inference and training, and publish the write-up."""

__version__ = "0.1.0"
