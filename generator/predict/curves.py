"""The site's simulated curves: for every shipped config and way of running it, the tensor peak at a few
batches at one length, plus the worked example's rows. Tensor peaks depend on the config and the library
versions only, so one recording serves every machine with those versions (generator/store/fit_table.py).

The tensor peak is the largest, over the moments of a step, of sums of storages whose sizes are affine in the
batch: a convex, piecewise-linear curve. Small batches can peak at another moment (the optimizer step, where
weights, gradients and AdamW state dominate) than large ones (the activations), and for a 7B the change comes
after batch 4: no short run of equal slopes proves the curve straight. So it is simulated at batches 1, 2, 4,
8, ... until its peak passes every budget the site answers. Between simulated batches the chord lies on or
above a convex curve, so an answer read from it errs, if at all, towards a smaller batch; it never says that a
batch fits which the simulation says does not."""

import time
from importlib import resources

from generator.answers.setups import KINDS
from generator.matrix import batch_limit, parse_row
from generator.model_source import SHIPPED_MODELS, ModelSource, resolve_model
from generator.predict import parallel
from generator.predict.simulate import METHOD, simulate_kept, try_simulate
from generator.store.environment import Environment
from generator.store.fit_table import Curve, FitTable, Simulated, libraries

SITE_SEQ_LEN = 1024
STOP_BYTES = 128 * 2**30  # past the largest budget the site answers (80 GiB) with any overhead
EXAMPLE_MODEL = "Llama-2-7b"
EXAMPLE_ROWS = (  # the worked example in the set-ups people run: batch 1 × 512, and a realistic 8 × 2048
    ("run it", "gen-b1-s512-n32-bf16"), ("run it", "gen-b8-s2048-n32-bf16"),
    ("train all of it", "train-b1-s512-bf16"), ("train all of it", "train-b8-s2048-bf16"),
    ("train all of it, mixed precision", "train-b1-s512-amp"),
    ("train a LoRA adapter", "train-b1-s512-bf16-lora8"), ("train a LoRA adapter", "train-b8-s2048-bf16-lora8"),
)
SHARDED_MODEL = "Llama-3.1-70B"
# (set-up, its row on one card): what the fit page answers for the 70B on 8 cards, and on 16 where 8 fall short
SHARDED_SETUPS = (
    ("16-bit training", "train-b{b}-s{s}-bf16-zero1x8"),
    ("16-bit training", "train-b{b}-s{s}-bf16-zero2x8"),
    ("16-bit training", "train-b{b}-s{s}-bf16-zero3x8"),
    ("16-bit training, checkpointed", "train-b{b}-s{s}-ckpt-bf16-zero3x8"),
    ("16-bit training, checkpointed", "train-b{b}-s{s}-ckpt-bf16-zero3x16"),
    ("mixed-precision training", "train-b{b}-s{s}-amp-zero3x8"),
    ("LoRA on a bf16 base", "train-b{b}-s{s}-bf16-lora8-zero3x8"),
    ("QLoRA", "train-b{b}-s{s}-bf16-nf4-lora8-zero3x8"))


def curve(source: ModelSource, kind: str, seq_len: int, row: str = "") -> Curve | None:
    """One kind's curve (None where it cannot be simulated): batches 1, 2, 4, 8, ... until the peak passes
    STOP_BYTES (at batch 2 or later) or the batch the tool's limits allow. The row is the set-up's, unless
    another is given."""
    template = (row or KINDS[kind]).replace("{s}", str(seq_len))
    limit = batch_limit(seq_len)
    points: list[tuple[int, int, int]] = []
    parameters, batch = 0, 1
    while batch <= limit:
        prediction, _ = try_simulate(parse_row(template.format(b=batch)), source)
        if prediction is None:
            return None
        points.append((batch, prediction.tensor_peak_bytes, prediction.cuda_reserved_bytes))
        parameters = prediction.parameters
        if prediction.tensor_peak_bytes > STOP_BYTES and len(points) >= 2:  # two points: a slope to read
            break
        batch *= 2
    if len(points) < 2:
        return None
    return Curve(model=source.name, config_sha256=source.config_sha256, parameters=parameters, kind=kind,
                 row=template, batches=tuple(b for b, _, _ in points), tensor_bytes=tuple(t for _, t, _ in points),
                 cuda_bytes=tuple(c for _, _, c in points))


def example_row(task: str, row_id: str) -> Simulated:
    """The worked example's config, simulated at one of the example's rows."""
    found = simulate_kept(parse_row(row_id), resolve_model(EXAMPLE_MODEL))
    return Simulated(model=EXAMPLE_MODEL, task=task, row=row_id, tensor_peak_bytes=found.tensor_peak_bytes,
                     cuda_reserved_bytes=found.cuda_reserved_bytes)


def sharded_model() -> ModelSource:
    """The config the fit page answers for on several cards: Llama-3.1-70B's (generator/models/benchmark/)."""
    return resolve_model(str(resources.files("generator") / "models" / "benchmark" / f"{SHARDED_MODEL}.json"))


def site_curves(environment: Environment, seq_len: int | None = None, workers: int = 1) -> FitTable:
    """Every shipped config's curves, the 70B's on several cards, and the example's rows; with several
    workers, side by side."""
    seq_len = seq_len or SITE_SEQ_LEN
    started = time.perf_counter()
    sources = [resolve_model(name) for name in SHIPPED_MODELS]
    tasks = [(source, kind, seq_len) for source in sources for kind in KINDS]
    found = parallel.starmap(curve, tasks, workers)
    sharded = parallel.starmap(curve, [(sharded_model(), kind, seq_len, row) for kind, row in SHARDED_SETUPS],
                               workers)
    example = parallel.starmap(example_row, EXAMPLE_ROWS, workers)
    return FitTable(libraries=libraries(environment), environment=environment.id, seq_len=seq_len,
                    curves=tuple(item for item in found if item is not None), example=tuple(example),
                    seconds=round(time.perf_counter() - started, 1), simulator=METHOD,
                    sharded=tuple(item for item in sharded if item is not None))


def is_current(table: FitTable | None, environment: Environment) -> bool:
    """Whether a table was simulated under these library versions from the shipped configs as they are now."""
    if table is None or table.libraries != libraries(environment) or table.simulator != METHOD:
        return False  # other library versions, or an older simulator's curves
    shipped = {resolve_model(name).config_sha256 for name in SHIPPED_MODELS}
    return {c.config_sha256 for c in table.curves} == shipped
