"""Allow `python -m generator`."""

from generator.cli import main

if __name__ == "__main__":  # the worker server imports __main__ in every child: keep this guard
    raise SystemExit(main())
