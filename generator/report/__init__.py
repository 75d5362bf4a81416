"""The report stage: the site, from frozen, typed page contexts that templates only place.

- ``views``, ``findings``, ``example`` and ``article``: the article's context, computed from its rows.
- ``versions`` and ``fit_page``: the other pages' contexts; ``charts``: the SVG charts, their look and the
  article's; ``page_charts``: the versions and fit pages' charts.
- ``render``: templates to Markdown and HTML; ``site``: load, render, then write; ``output``: the folder swap.
- ``answer``: the article's first screen; ``claims``: its sentences of direction and size; ``allocators`` and
  ``low_bit``: its allocator and bitsandbytes sections.
- ``fit_first``, ``calculator`` and ``sharded``: the fit page's first screen, calculator and several-card answer;
  ``history``: the versions page's release history; ``gpu_validation``: what a GPU confirmed of the GPU figures;
  ``between``: what the fit page says of an answer between simulated batches; ``published_page``: the page
  of published GPU figures against their simulations; ``docs``: the docs pages, from templates/docs-*.md.

It imports diff (the versions page), the store and the core; never torch, never predict."""
