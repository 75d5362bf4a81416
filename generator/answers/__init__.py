"""The answers stage, torch-free, beside measure and diff: what a "will it fit?" answer is made of, declared once
and read by predict (which simulates) and report (which places the answers on the pages).

- ``setups``: the set-ups people ask about, each with the row that answers it and its precision and recipe.
- ``fit``: an answer (the largest batch of a set-up within a budget), what a budget must hold for a row on
  each target, and the one search for that batch over any peak(batch); ``from_curve``: an answer read from a
  recorded curve, the one rule the fit page, its calculator and `fit` read curves by.
- ``cuda_allocator``: the CUDA caching allocator, replayed over a simulation's allocations, with its documented
  constants and the context allowance a device adds.
- ``overhead``: the process model, a tensor peak to a net peak, fitted on measured rows; ``accuracy``: that
  model judged out of sample, and the band it validates; ``margin``: fit's default margin from that band,
  widened where the process model is another release's.
- ``published``: the simulation against peaks others published on GPUs, and QLoRA's allowance from them, which
  every GPU answer for a 4-bit row carries.

It imports the store and the core, never measure, predict, report, diff or the command line."""
