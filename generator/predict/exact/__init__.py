"""The exact simulation, the reference: a row's steps (generator/steps.py, the worker's own) run under PyTorch's
FakeTensorMode at the model's full depth, at the row's own batch and with every new token, with every live tensor
storage followed. This is the only part a new architecture or a new row coordinate needs to touch.

- ``run``: one run of the steps under a FakeTensorMode (``plain_mode``, PyTorch's own with the tracker stacked on
  it, unless the fast path gives its own), and the prepared model's counts.
- ``tracker``: the live storages through a run, as a journal that replays to its figures.
- ``cuda_program``: what CUDA runs where it differs from the CPU (SDPA's backend, autocast's lists, the fused
  8-bit update), for GPU figures; ``sharding``: one card's share of a sharded row; ``fake_friendly``: what fake
  tensors cannot do, done as the real run does it; ``parts``: a finished run's figures, a program's part of a
  prediction, and ``simulate_exactly``, the reference end to end.

It imports the core and the answers stage (the CUDA caching allocator); never the fast path
(generator.predict.fast) nor the rest of predict. The fast path imports it, in that direction only
(tests/test_structure.py)."""
