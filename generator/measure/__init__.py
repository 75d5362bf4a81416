"""The measure stage: real peak memory, one fresh worker process per repeat.

- ``matrix_run``: a matrix of rows in repeat rounds, one TOML file per row; ``probe``: one row under a cap.
- ``runner`` and ``server``: the worker server each round's workers are forked from, and one repeat's run.
- ``worker`` and ``peak``: the forked child that runs a row's steps and reads the process's peak per phase;
  ``protocol``: the state and result files it leaves, and their one reader.
- ``limits``: memory caps; ``lock``: one run per folder; ``progress``: the live display and ETA.
- ``environment``: the facts of this machine a result depends on; ``method``: the measuring code's hash.
- ``gpu_context``: what a card holds beside the caching allocator, probed in a fresh process.
- ``allocator``: the memory allocator a row's processes run under; ``estimate``: a run's time, before it starts.
- ``cluster`` and ``cluster_run``: each repeat as a submitit job (local, Slurm or in process), and the matrix
  through them.

It imports the store and the core, never predict, report, diff or the command line."""
