"""The fast path: the exact simulation's figures (generator.predict.exact), byte for byte, in less time. Nothing
here decides a figure; each module only avoids work whose result it can prove, and each is tested against the
exact run on every row kind (tests/test_fake_mode.py, test_depth.py, test_batches.py, test_decode.py,
test_stack.py, test_exact.py).

- ``fake_mode``: the simulation's FakeTensorMode, which tracks storages itself and answers a repeated operator
  from FakeTensorMode's cache by a cheaper key; ``fake_hits``: two of FakeTensorMode's answers made directly.
- ``small_depths``: the driver, a row at full depth from its runs at a few small depths; ``depth``: a deep
  stack's journal written from them, with ``inserted_runs`` finding where one more layer's entries sit and
  ``stack`` checking that the small depths stand for every layer; ``decode``: a generation row's journal written
  from two runs of a few new tokens; ``batches``: a row's journal at any batch from the line through two of them.
- ``kept``: a question asked again, its simulation read back from the cache without importing torch.

It imports generator.predict.exact, the answers stage, the store and the core; never the rest of predict."""
