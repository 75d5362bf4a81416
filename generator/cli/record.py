"""`fit --record`: the shipped configs' curves into _fit.toml, or with --model one model's curves into its own
file, which the next build offers in the fit page's calculator."""

import argparse
import sys

from generator.cli.errors import UsageError
from generator.escaping import plain_terminal_text
from generator.matrix import DEFAULT_SEQ_LEN, Mode, RowSpec


def record_curves(args: argparse.Namespace, environment, model, workers: int) -> int:
    """fit --record: the shipped configs' curves into _fit.toml, or with --model one model's into its own file
    (merged with the lengths recorded before), which the next build offers in the fit page's calculator."""
    from generator.answers.published import qlora_ppm
    from generator.cli.arguments import parse_rows, resolved_model
    from generator.predict.curves import CALCULATOR_LENGTHS, calculator_edges, lengths_of, model_curves, site_curves
    from generator.store.fit_table import save_fit
    from generator.store.recorded_curves import load_recorded, merged, recorded_path, save_recorded

    folder = args.measurements / environment.id
    if args.model is None:
        path = save_fit(site_curves(environment, workers, qlora_ppm=qlora_ppm(args.measurements, "gpu")), folder)
        print(f"wrote {path}: simulated curves for every shipped config, which `build` reads for every "
              f"environment with these library versions", file=sys.stderr)
        return 0
    seq = args.seq or DEFAULT_SEQ_LEN
    source = resolved_model(args, parse_rows([RowSpec(Mode.INFERENCE, 1, seq).id], seq, None))
    lengths = lengths_of(source, (args.seq,) if args.seq else CALCULATOR_LENGTHS)
    path = recorded_path(folder, source.name)
    old = load_recorded(path) if path.exists() else None  # a file it cannot read is refused, not replaced
    if old is not None and old.config_sha256 != source.config_sha256:  # another model's curves: never written over
        raise UsageError(f"--model {source.reference}: {path} holds the curves of another config named "
                         f"{old.model!r}; give this config another name (its file or folder) to record it beside them")
    edges = calculator_edges(model, qlora_ppm=qlora_ppm(args.measurements, "gpu"))
    recorded = model_curves(source, environment, lengths, edges, workers)
    if not recorded.curves:
        raise UsageError(f"--model {source.reference}: no set-up could be simulated, so nothing was recorded")
    save_recorded(merged(old, recorded), folder)
    print(plain_terminal_text(f"wrote {path}: {len(recorded.curves)} curves of {source.name} at "
                              f"{', '.join(f'{n:,}' for n in lengths)} tokens; the next `build` offers them in "
                              "the fit page's calculator"), file=sys.stderr)
    return 0
