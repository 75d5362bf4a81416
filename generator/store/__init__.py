"""The store: the one owner of result files on disk.

- ``records``: the typed records (a row's result, its repeats, its summary, its prediction) and the
  declarations of the figures a repeat records; ``summary``: how repeats combine into a row's summary.
- ``environment``: the set-up a result was measured on, and its id.
- ``codec``: TOML in and out, strictly checked; ``documents``: the one versioned loader of every file kind,
  which brings older schemas up to date and refuses what it does not know.
- ``layout``: where files live; ``files``: one atomic writer, one strict TOML reader, logs appended to.
- ``catalog``: a measurements folder, each file loaded once per command.
- ``comparability``: which keys must agree for two results to be compared.
- ``fit_table``: the simulated curves that the site and ``predict`` both read; ``recorded_curves``: the curves
  of a model recorded with `fit --model X --record`, which the calculator offers.
- ``history``: the release history's files; ``runlog``: the logs beside the rows; ``simulations``: simulations
  kept on disk; ``configs``: the shipped config a result was measured on; ``plausible``: figures no
  measurement could have produced, refused; ``gpu_context``: what a card held beside the caching allocator;
  ``published``: the published-figures suite and the answers recorded for it; ``prune``: which environment
  folders a newer one of their release supersedes, and their removal.

It imports only the core modules (generator/*.py), never a stage above it."""
