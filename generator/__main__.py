"""Allow `python -m generator`."""

from generator.cli import run

if __name__ == "__main__":  # the worker server imports __main__ in every child: keep this guard
    run()
