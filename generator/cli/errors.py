"""The command line's one error of its own: bad input, reported as one line with exit status 2 (cli/__init__.py)."""


class UsageError(Exception):
    """Bad input: reported as one line, exit status 2."""
