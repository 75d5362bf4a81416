"""The command line: `memory-budget measure | probe | predict | fit | build | diff | gpu | published | prune`.

Arguments are parsed into typed values (``parser``) and handed to the command (``commands``), which imports
its stage when it runs; ``sharding`` checks fit's --gpus and --sharding and names the set-ups whose library is
missing; ``gpu_kit`` is the GPU validation kit; ``refresh`` orchestrates what a page still needs after `measure`
(predictions, the step-2 probe, the curves), each step skipped where current; ``confirm`` measures fit's
answers (`fit --confirm`); ``record`` writes `fit --record`'s curves; ``published`` simulates the
published-figures suite; ``prune`` lists and removes superseded environments; ``diff_command`` compares two
environments; ``arguments`` checks --model and --rows for every command that takes them; ``errors`` is the one
error of the command line's own. Bad input of any kind is reported as one line on stderr with exit status 2;
Ctrl-C and SIGTERM end a run cleanly with exit status 130."""

import gc
import signal
import sys

from generator.cli.commands import COMMANDS, EXIT_INTERRUPTED, require_extra
from generator.cli.errors import UsageError
from generator.cli.parser import build_parser
from generator.escaping import plain_terminal_text
from generator.matrix import RowError

EXIT_BAD_INPUT = 2


def _refuse(message: str) -> int:
    """Report bad input as one line: characters that would break the line (from the user's input) are escaped."""
    print(f"memory-budget: error: {plain_terminal_text(message)}", file=sys.stderr)
    return EXIT_BAD_INPUT


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    """Entry point of `memory-budget` and `python -m generator`."""
    from generator.measure.lock import LockedError
    from generator.model_source import ModelError
    from generator.report.output import OutputError
    from generator.store.records import ResultsError

    # Ctrl-C must stop a run even where this process was started with SIGINT ignored, as a non-interactive
    # shell starts a background job (`cmd &`): Python then leaves it ignored, and the signal would be lost.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)  # stop as cleanly on `kill` as on Ctrl-C
    try:
        args = build_parser().parse_args(argv)
        require_extra(args.command)
        return COMMANDS[args.command](args)
    except (UsageError, RowError, ModelError, ResultsError, LockedError, OutputError) as error:
        return _refuse(str(error))
    except OSError as error:
        return _refuse(f"{error.filename or ''}: {error.strerror or error}")
    except KeyboardInterrupt:
        print("memory-budget: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run() -> None:
    """The process's entry (`memory-budget`, `python -m generator`): main, and its exit status. The interpreter's
    last collections then skip the objects the command left (gc.freeze): a simulation leaves hundreds of thousands,
    and walking them cost half a second of fit's wall time. Everything else about exiting (atexit, buffered
    output) is as before."""
    code = main()
    gc.freeze()
    raise SystemExit(code)
