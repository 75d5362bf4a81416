"""The predict stage: memory by simulation under FakeTensorMode, through the worker's own steps.

- ``simulate``: one row's tensor memory; ``small_depths``: the row at full depth from its runs at a few small
  depths, where the fast paths below answer; ``fake_run``: one run of its steps under FakeTensorMode, the
  simulation's own (``fake_mode``: it tracks storages, and answers a repeated operator from FakeTensorMode's cache
  by a cheaper key; ``fake_hits``: two of FakeTensorMode's answers made directly, a constant's value and a cache
  hit's output); ``rows``: the `predict` command's rows, rendering and --record.
- ``tracker``: the live storages through a simulation, as a journal that replays to its figures; ``depth``:
  the fast path, a deep stack's journal written from four small depths (two, for another batch of a row),
  with ``inserted_runs`` finding where one more layer's entries sit, and ``stack`` telling where the small depths
  stand for every layer (each layer's signature, from the model on the meta device);
  ``decode``: a generation row's journal written from two runs of a few new tokens; ``batches``: a row's
  journal at any batch written from the line through two of its batches, checked at a third (batch 3, or the far one).
- ``kept``: the fast path of a question asked again, its simulations and its config's checks read back from the
  cache without importing torch (the reference path is ``simulate``'s).
- ``fit``: the largest batch that fits a budget; ``fit_report``: its text and JSON.
- ``benchmark``: predict's own speed and memory, recorded.
- ``sharding``: one card's share of a sharded row; ``fake_friendly``: what fake tensors cannot do, done as the
  real run does it. The CUDA caching allocator it replays lives in the answers stage (answers/cuda_allocator.py).
- ``cuda_program``: what CUDA runs where it differs from the CPU (SDPA's backend, autocast's lists, the fused
  8-bit update), for GPU figures; ``programs``: the two programs' tensor peaks side by side.
- ``curves``: the site's simulated curves; ``parallel``: simulations side by side; ``history``: tensor peaks
  under the installed release; ``published``: the published-figures suite's recipes, simulated.

It imports measure (for the environment), answers, the store and the core; never report. It simulates and
never runs a measurement of its own: `refresh`, which probes and measures too, is the command line's."""
