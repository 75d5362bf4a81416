"""The diff stage: one model's rows compared between two environments.

- ``compare``: the Comparison object and each row's verdict against its noise.
- ``render``: its terminal, Markdown and JSON renderers, each a separate function.
- ``sensitivity``: what `diff` can see: rows measured with a known extra allocation, diffed.

It imports the store and the core only, and never torch."""
