"""The site's simulated curves: for every shipped config and way of running it, the tensor peak at a few
batches at one length, plus the worked example's rows. Tensor peaks depend on the config and the library
versions only, so one recording serves every machine with those versions (generator/store/fit_table.py).

The tensor peak is the largest, over the moments of a step, of sums of storages whose sizes are affine in the
batch: a convex, piecewise-linear curve. Small batches can peak at another moment (the optimizer step, where
weights, gradients and AdamW state dominate) than large ones (the activations), and for a 7B the change comes
after batch 4: no short run of equal slopes proves the curve straight. So it is simulated at batches 1, 2, 4,
8, ... until its peak passes every budget the site answers. Between simulated batches the chord lies on or
above a convex curve, so an answer read from it errs, if at all, towards a smaller batch; it never says that a
batch fits which the simulation says does not.

For a model recorded with `fit --model X --record`, at the cards the page lists (its edges), a curve also holds
every batch `fit --target gpu`'s search asks at each card, and the batch after its answer. The search is
deterministic, so a reader that runs it over the curve asks those batches in turn and reads the same simulated
reserves: at those cards the curve's GPU answer is fit's, to the byte, even where a reserve is not monotone in
the batch (with CUDA's foreach AdamW, a checkpointed row's can dip)."""

import time
from dataclasses import dataclass
from importlib import resources
from typing import NamedTuple

from generator.answers.fit import (
    GPU_GROUPS_GIB,
    SHARDED_CARD_GIB,
    STATED_MARGIN,
    largest_batch,
    needs,
    search_text,
    usable_bytes,
)
from generator.answers.published import PPM, row_ppm
from generator.answers.setups import BY_ID
from generator.budget import ProcessModel
from generator.matrix import batch_limit, parse_row
from generator.model_source import SHIPPED_MODELS, ModelSource, resolve_model
from generator.predict import parallel
from generator.predict.simulate import METHOD, simulate_kept, try_parts
from generator.store.environment import Environment
from generator.store.fit_table import Curve, FitTable, Simulated, libraries
from generator.store.recorded_curves import RecordedCurves
from generator.store.records import CpuPart, CudaPart
from generator.units import GIB

SITE_SEQ_LEN = 1024
CALCULATOR_LENGTHS = (256, 512, 1024, 2048, 4096, 8192)  # what `fit --model X --record` records by default
STOP_BYTES = 128 * 2**30  # past the largest budget the site answers (80 GiB) with any overhead
EXAMPLE_MODEL = "Llama-2-7b"
EXAMPLE_ROWS = (  # the worked example in the set-ups people run: batch 1 × 512, and a realistic 8 × 2048
    ("run it", "gen-b1-s512-n32-bf16"), ("run it", "gen-b8-s2048-n32-bf16"),
    ("train all of it", "train-b1-s512-bf16"), ("train all of it", "train-b8-s2048-bf16"),
    ("train all of it, mixed precision", "train-b1-s512-amp"),
    ("train a LoRA adapter", "train-b1-s512-bf16-lora8"), ("train a LoRA adapter", "train-b8-s2048-bf16-lora8"),
)
SHARDED_MODEL = "Llama-3.1-70B"
# (set-up id, its row on one card): what the fit page answers for the 70B on 8 cards, and on 16 where 8 fall short
SHARDED_SETUPS = (
    ("bf16", "train-b{b}-s{s}-bf16-zero1x8"),
    ("bf16", "train-b{b}-s{s}-bf16-zero2x8"),
    ("bf16", "train-b{b}-s{s}-bf16-zero3x8"),
    ("ckpt-bf16", "train-b{b}-s{s}-ckpt-bf16-zero3x8"),
    ("ckpt-bf16", "train-b{b}-s{s}-ckpt-bf16-zero3x16"),
    ("amp", "train-b{b}-s{s}-amp-zero3x8"),
    ("bf16-lora", "train-b{b}-s{s}-bf16-lora8-zero3x8"),
    ("qlora", "train-b{b}-s{s}-bf16-nf4-lora8-zero3x8"))


@dataclass(frozen=True)
class Edge:
    """A budget `fit` may be asked: the target, what it may use after the margin, the process model a CPU
    answer reads the tensor peak through, and QLoRA's allowance a GPU answer puts on a 4-bit row's reserve."""

    target: str
    usable: int
    process: ProcessModel
    qlora_ppm: int = PPM


def curve(source: ModelSource, setup: str, seq_len: int, row: str = "",
          edges: tuple[Edge, ...] = ()) -> Curve | None:
    """One set-up's curve, filed under its id (None where it cannot be simulated): batches 1, 2, 4, 8, ... until
    the peak passes STOP_BYTES (at batch 2 or later) or the batch the tool's limits allow, and the batches fit's
    search asks at each edge. The row is the set-up's, unless another is given."""
    template = (row or BY_ID[setup].row).replace("{s}", str(seq_len))
    limit = batch_limit(seq_len)
    points: dict[int, Point] = {}
    batch, parameters = 1, 0
    while batch <= limit:
        point, _ = simulated(template.format(b=batch), source)
        if point is None:
            return None
        points[batch], parameters = point, point.cpu.parameters
        if point.cpu.tensor_peak_bytes > STOP_BYTES and len(points) >= 2:  # two points: a slope to read
            break
        batch *= 2
    if len(points) < 2:
        return None
    if not _search_edges(points, source, template, edges, limit):
        return None
    batches = sorted(points)
    return Curve(model=source.name, config_sha256=source.config_sha256, parameters=parameters,
                 setup=setup, row=template, batches=tuple(batches),
                 tensor_bytes=tuple(points[b].cpu.tensor_peak_bytes for b in batches),
                 cuda_bytes=tuple(points[b].cuda.cuda_reserved_bytes for b in batches))


class Point(NamedTuple):
    """A curve's batch: the CPU's part (its tensor peak) and CUDA's (its reserve, replayed for the default
    allocator alone: no curve reads the expandable one)."""

    cpu: CpuPart
    cuda: CudaPart


def simulated(row_id: str, source: ModelSource) -> tuple[Point | None, str]:
    """A curve's batch, or the row's one-line reason (try_parts, without the expandable reserve)."""
    parts, error = try_parts(parse_row(row_id), source, expandable=False)
    return (None, error) if parts is None else (Point(*parts), "")


def _search_edges(points: dict[int, Point], source: ModelSource, template: str, edges: tuple[Edge, ...],
                  limit: int) -> bool:
    """Add to the points every batch fit's search asks at each edge (answers/fit.py largest_batch), and the
    batch after its answer; False where a batch cannot be simulated. The search is deterministic, so a reader
    that runs it over the curve asks only these batches, reads the same peaks, and answers as fit does, even
    where a simulated reserve is not monotone in the batch."""
    def at(batch: int) -> Point:
        if batch not in points:
            point, error = simulated(template.format(b=batch), source)
            if point is None:
                raise _Unsimulated(error)
            points[batch] = point
        return points[batch]

    try:
        for edge in edges:
            def peak(batch: int, edge: Edge = edge) -> int:
                return needs(edge.target, at(batch).cpu.tensor_peak_bytes, at(batch).cuda.cuda_reserved_bytes,
                             edge.process, row_ppm(template.format(b=1), edge.qlora_ppm))
            answer = largest_batch(peak, edge.usable, limit)
            if answer < limit:
                at(answer + 1)
    except _Unsimulated:
        return False
    return True


class _Unsimulated(Exception):
    """A batch fit's search asked for could not be simulated."""


def example_row(task: str, row_id: str) -> Simulated:
    """The worked example's config, simulated at one of the example's rows."""
    found = simulate_kept(parse_row(row_id), resolve_model(EXAMPLE_MODEL))
    return Simulated(model=EXAMPLE_MODEL, task=task, row=row_id, tensor_peak_bytes=found.tensor_peak_bytes,
                     cuda_reserved_bytes=found.cuda_reserved_bytes)


def sharded_model() -> ModelSource:
    """The config the fit page answers for on several cards: Llama-3.1-70B's (generator/models/benchmark/)."""
    return resolve_model(str(resources.files("generator") / "models" / "benchmark" / f"{SHARDED_MODEL}.json"))


GPU_ONLY = ProcessModel(0.0, 0.0, 0, "")  # what a GPU edge carries: its answers read no process model


PAGE_CARDS = tuple(gib for group in GPU_GROUPS_GIB for gib in group)  # the cards the page lists, in GiB


def calculator_edges(process: ProcessModel = GPU_ONLY, cards: tuple[int, ...] = PAGE_CARDS,
                     qlora_ppm: int = PPM) -> tuple[Edge, ...]:
    """The cards the fit page's tables and calculator list (in GiB), as `fit --target gpu` answers them: each
    with the stated margin, and QLoRA's allowance."""
    return tuple(Edge("gpu", usable_bytes(gib * GIB, STATED_MARGIN), process, qlora_ppm) for gib in cards)


def lengths_of(source: ModelSource, lengths: tuple[int, ...] = CALCULATOR_LENGTHS) -> tuple[int, ...]:
    """The lengths a config's positions allow (GPT-2's 1,024 positions stop it there)."""
    return tuple(n for n in lengths if not source.max_positions or n <= source.max_positions)


def site_curves(environment: Environment, workers: int = 1, cards: tuple[int, ...] = PAGE_CARDS,
                lengths: tuple[int, ...] = (), qlora_ppm: int = PPM) -> FitTable:
    """Every shipped config's curves at the page's length (and any other lengths asked, which the calculator
    then offers), with fit's batches at each card (in GiB) the page lists, so that the page's GPU answers at
    those cards are fit's own; the 70B's on several cards, with its card's; and the example's rows; with
    several workers, side by side."""
    started, lengths = time.perf_counter(), lengths or (SITE_SEQ_LEN,)
    edges = calculator_edges(cards=cards, qlora_ppm=qlora_ppm)
    sources = [resolve_model(name) for name in SHIPPED_MODELS]
    tasks = [(source, setup, seq_len, "", edges) for seq_len in lengths for source in sources
             if seq_len in lengths_of(source, lengths) for setup in BY_ID]
    found = [item for item in parallel.starmap(curve, tasks, workers) if item is not None]
    card = calculator_edges(cards=(SHARDED_CARD_GIB,), qlora_ppm=qlora_ppm)  # the one card the sharded section answers
    sharded = parallel.starmap(curve, [(sharded_model(), setup, SITE_SEQ_LEN, row, card)
                                       for setup, row in SHARDED_SETUPS], workers)
    example = parallel.starmap(example_row, EXAMPLE_ROWS, workers)
    return FitTable(libraries=libraries(environment), environment=environment.id, seq_len=SITE_SEQ_LEN,
                    curves=tuple(item for item in found if item.seq_len == SITE_SEQ_LEN), example=tuple(example),
                    seconds=round(time.perf_counter() - started, 1), simulator=METHOD,
                    sharded=tuple(item for item in sharded if item is not None),
                    other_lengths=tuple(item for item in found if item.seq_len != SITE_SEQ_LEN), cards=cards,
                    search=search_text(qlora_ppm), bitsandbytes=environment.bitsandbytes, setups=tuple(BY_ID))


def model_curves(source: ModelSource, environment: Environment, lengths: tuple[int, ...], edges: tuple[Edge, ...],
                 workers: int = 1) -> RecordedCurves:
    """One model's curves for the calculator (`fit --model X --record`), at each length asked, with fit's
    batches at each edge; a set-up that cannot be simulated (no LoRA targets, say) has none."""
    tasks = [(source, setup, seq_len, "", edges) for seq_len in lengths_of(source, lengths) for setup in BY_ID]
    found = tuple(item for item in parallel.starmap(curve, tasks, workers) if item is not None)
    return RecordedCurves(model=source.name, config_sha256=source.config_sha256, libraries=libraries(environment),
                          environment=environment.id, simulator=METHOD, curves=found,
                          search=search_text(edges[0].qlora_ppm if edges else PPM))


def is_current(table: FitTable | None, environment: Environment, qlora_ppm: int = PPM) -> bool:
    """Whether a table was simulated under these library versions from the shipped configs as they are now, for
    the set-ups declared now, its GPU edges searched with this QLoRA allowance."""
    if table is None or table.libraries != libraries(environment) or table.simulator != METHOD:
        return False  # other library versions, or an older simulator's curves
    if table.cards != PAGE_CARDS or table.search != search_text(qlora_ppm):
        return False  # curves without fit's batches at each card the page lists, or with another search's
    if table.setups != tuple(BY_ID):
        return False  # simulated for other set-ups than answers/setups.py declares (one added, say)
    shipped = {resolve_model(name).config_sha256 for name in SHIPPED_MODELS}
    return {c.config_sha256 for c in table.curves} == shipped
