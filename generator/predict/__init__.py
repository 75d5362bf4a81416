"""The predict stage: memory by simulation under FakeTensorMode, through the worker's own steps.

- ``simulate``: one row's tensor memory; ``rows``: the `predict` command's rows, rendering and --record.
- ``fit``: the largest batch that fits a budget; ``fit_report``: its text, JSON and --confirm.
- ``benchmark``: predict's own speed and memory, recorded.

It imports measure (for --confirm and the environment), the store and the core; never report."""
