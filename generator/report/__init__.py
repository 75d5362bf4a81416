"""The report stage: the site, from frozen, typed page contexts that templates only place.

- ``views``, ``findings``, ``example`` and ``article``: the article's context, computed from its rows.
- ``versions`` and ``fit_page``: the other pages' contexts; ``charts``: the SVG charts.
- ``render``: templates to Markdown and HTML; ``site``: load, render, then write; ``output``: the folder swap.

It imports diff (the versions page), the store and the core; never torch, never predict."""
