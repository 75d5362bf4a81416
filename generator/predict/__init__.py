"""The predict stage: memory by simulation under FakeTensorMode, through the worker's own steps.

Two packages do the simulating, in one direction: ``exact``, the reference (a row's steps run under PyTorch's own
FakeTensorMode at full depth, every storage followed: the only part a new architecture needs to touch), and
``fast``, which gives the same figures, byte for byte, in less time (its own FakeTensorMode, small depths, a
batch's line, the decode steps written, the cache read back) and imports ``exact``, never the reverse. The modules
here put them to use:

- ``simulate``: one row's figures, by the fast path (checked against the exact run on every row kind:
  tests/test_exact.py), kept on disk; ``rows``: the `predict` command's rows, rendering and --record.
- ``fit``: the largest batch that fits a budget; ``fit_report``: its text and JSON.
- ``curves``: the site's simulated curves; ``parallel``: simulations side by side; ``history``: tensor peaks
  under the installed release; ``published``: the published-figures suite's recipes, simulated;
  ``programs``: the CPU's and CUDA's programs' tensor peaks side by side; ``benchmark``: predict's own speed and
  memory, recorded. The CUDA caching allocator it replays lives in the answers stage (answers/cuda_allocator.py).

It imports measure (for the environment), answers, the store and the core; never report. It simulates and
never runs a measurement of its own: `refresh`, which probes and measures too, is the command line's."""
