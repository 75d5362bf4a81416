"""`fit`: the largest batch that fits a memory budget, by simulation, for each way of running a model.

Predicted memory is close to linear in the batch (fixed costs plus a per-sequence cost), so the answers' search
(generator/answers/fit.py) asks for few simulations: the answer's prediction is within the usable budget and the
next batch's is not. The usable budget is the budget less a safety margin
for what the simulation does not see (the allocator's fragmentation, a GPU's context and workspaces)."""

from collections.abc import Callable
from dataclasses import replace
from functools import partial
from pathlib import Path

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.answers.fit import STATED_MARGIN, FitAnswer, answer_within, expected_peak, search_text, usable_bytes
from generator.answers.from_curve import curve_answer
from generator.answers.published import PPM, qlora_ppm, row_ppm
from generator.answers.setups import BY_NAME, KINDS, START_ORDER, row_template
from generator.budget import ProcessModel
from generator.escaping import one_line_error
from generator.matrix import RowSpec, batch_limit, parse_row
from generator.model_source import ModelError, ModelSource
from generator.predict import parallel
from generator.predict.simulate import METHOD, simulate_kept_part
from generator.quantize import uses_bitsandbytes
from generator.store.environment import Environment
from generator.store.fit_table import Curve, find_fit_folder, libraries
from generator.store.layout import FIT_FILE
from generator.store.recorded_curves import RECORDED_FOLDER, recorded_files
from generator.units import format_mib

TARGETS = {  # where a budget lives -> what is added to the simulated tensors
    "cpu": "this machine's process overhead, fitted on its measured rows",
    "gpu": "the CUDA caching allocator's reserve (simulated) plus the CUDA context allowance",
    "gpu-expandable": "the caching allocator's reserve with expandable segments (simulated) plus the context",
}


def overhead_text(model: ProcessModel, target: str) -> str:
    """What the answers add to the tensors, in words."""
    if target == "cpu":
        return model.describe()
    return f"{TARGETS[target]} ({format_mib(CUDA_CONTEXT_BYTES)}); simulated, not validated on a device"


def target_program(target: str) -> Callable[[RowSpec, ModelSource], object]:
    """What a target's answers simulate: the CPU's program for a CPU budget (its tensor peak), CUDA's for a GPU
    (its reserve, replayed with expandable segments only for that target); each kept part is simulated once
    (generator/predict/simulate.py)."""
    return partial(simulate_kept_part, program="cpu" if target == "cpu" else "cuda",
                   expandable=target == "gpu-expandable")


class Predictor:
    """Expected peaks of one model's rows, each simulated once, for a CPU process or a GPU; with sharding (a
    key of matrix.SHARDED_KINDS and a number of GPUs), one card's peak of each training row. The simulator is
    the target's program (target_program) unless another is given. On a GPU a 4-bit row's reserve carries
    ``qlora_ppm``, QLoRA's allowance from the published peaks (answers/published.py suite_allowance); ``extra``:
    the tokens `fit --with` adds to each training set-up; ``curves``: the model's recorded curves by (set-up,
    length), each with its file, which answer where they cover the budget (read_curve)."""

    def __init__(self, source: ModelSource, model: ProcessModel,
                 simulator: Callable[[RowSpec, ModelSource], object] | None = None, target: str = "cpu",
                 sharding: tuple[str, int] | None = None, qlora_ppm: int = PPM, extra: tuple[str, ...] = (),
                 curves: dict[tuple[str, int], tuple[Curve, str]] | None = None) -> None:
        self.source, self.model, self.target = source, model, target
        self.simulator = simulator or target_program(target)
        self.sharding, self.qlora_ppm, self.extra, self.curves = sharding, qlora_ppm, extra, curves or {}
        self.cache: dict[str, int] = {}
        self.host: dict[str, int] = {}  # a GPU row's host memory beside the card (paged state, offloaded copies)
        self.parameters = 0  # the base model's, as the first simulation counted them

    def fresh(self) -> "Predictor":
        """A predictor like this one, with nothing simulated yet."""
        return Predictor(self.source, self.model, self.simulator, self.target, self.sharding, self.qlora_ppm,
                         self.extra, self.curves)

    def allowance(self, row: RowSpec) -> int:
        """The allowance on a row's simulated reserve, per million: QLoRA's on a GPU, else none."""
        return row_ppm(row.id, self.qlora_ppm) if self.target.startswith("gpu") else PPM

    def template(self, kind: str) -> str:
        """The row that answers a set-up, with the tokens asked and sharded as asked (answers/setups.py)."""
        return row_template(kind, self.sharding, self.extra)

    def peak(self, row_id: str) -> int:
        """The expected peak of a row, net of imports."""
        if row_id not in self.cache:
            row = parse_row(row_id)
            prediction = self.simulator(row, self.source)
            self.cache[row_id] = expected_peak(prediction, self.model, self.target,  # type: ignore[arg-type]
                                               self.allowance(row))
            self.host[row_id] = getattr(prediction, "cuda_host_bytes", 0) if self.target != "cpu" else 0
            adapters = prediction.trainable_parameters if row.lora_rank else 0  # type: ignore[attr-defined]
            self.parameters = self.parameters or prediction.parameters - adapters  # type: ignore[attr-defined]
        return self.cache[row_id]


def read_curve(predictor: Predictor, kind: str, seq_len: int, usable: int) -> FitAnswer | None:
    """The answer read from the set-up's recorded curve by the fit page's rule (answers/from_curve.py), where one
    is held for this row, this target's program reads it (a CPU's tensor peak, a GPU's default reserve) and it
    covers the budget; None where the search must simulate: past the curve, or with --with or sharding. On a GPU,
    a row with host memory beside the card (paged state, offloaded activations), which no curve holds, simulates
    its answer's batch, a simulated batch of the curve, for it."""
    curve, path = predictor.curves.get((BY_NAME[kind].id, seq_len), (None, ""))
    row_asked = predictor.template(kind).replace("{s}", str(seq_len))  # with --with or sharding, another row
    if curve is None or predictor.target not in ("cpu", "gpu") or curve.row != row_asked:
        return None  # no curve, or one of another program than this answer's
    answer = curve_answer(curve, predictor.target, usable, predictor.model, predictor.qlora_ppm)
    if answer.past_curve:
        return None
    row = parse_row(answer.row)
    host = predictor.target == "gpu" and answer.batch > 0 and (row.offload or row.optimizer == "paged_adamw8bit")
    if host:
        predictor.peak(answer.row)  # fills predictor.host for the row
    return replace(answer, allowance_ppm=predictor.allowance(row), read_from=path, simulations=int(host),
                   host_bytes=predictor.host.get(answer.row, 0))


def recorded_curves(root: Path, source: ModelSource,
                    environment: Environment) -> dict[tuple[str, int], tuple[Curve, str]]:
    """This config's curves recorded under these library versions, this simulator and this search (its GPU
    edges with QLoRA's allowance as it stands), by (set-up, length), each with its file, as the fit page's
    calculator offers them (report/calculator.py offered): the site's table's (_fit.toml) first, then those
    `fit --model X --record` wrote."""
    search, held = search_text(qlora_ppm(root, "gpu")), find_fit_folder(root, environment)
    found: dict[tuple[str, int], tuple[Curve, str]] = {}
    if held is not None and (held[1].simulator, held[1].search) == (METHOD, search):
        folder, table = held
        found = {(c.setup, c.seq_len): (c, f"{folder.name}/{FIT_FILE}")
                 for c in (*table.curves, *table.other_lengths) if c.config_sha256 == source.config_sha256}
    for file, recorded in recorded_files(root, libraries(environment), METHOD, search):
        path = f"{file.parent.parent.name}/{RECORDED_FOLDER}/{file.name}"
        for c in recorded.curves:
            if c.config_sha256 == source.config_sha256:
                found.setdefault((c.setup, c.seq_len), (c, path))
    return found


def largest_batch(predictor: Predictor, kind: str, seq_len: int, usable: int) -> FitAnswer:
    """The largest batch of a set-up within the usable budget: read from its recorded curve where one covers
    the budget (read_curve), else by the answers' one search over simulations (generator/answers/fit.py), with
    how many simulations it took."""
    read = read_curve(predictor, kind, seq_len, usable)
    if read is not None:
        return read
    template, before = predictor.template(kind), len(predictor.cache)
    found = answer_within(kind, template.format(b="{b}", s=seq_len),
                          lambda batch: predictor.peak(template.format(b=batch, s=seq_len)), usable,
                          batch_limit(seq_len))
    return replace(found, simulations=len(predictor.cache) - before, parameters=predictor.parameters,
                   allowance_ppm=predictor.allowance(parse_row(template.format(b=1, s=seq_len))),
                   host_bytes=predictor.host.get(found.row, 0))


def answer_or_reason(predictor: Predictor, kind: str, seq_len: int, usable: int) -> FitAnswer:
    """largest_batch, or for a kind that cannot be simulated (no LoRA targets for the architecture, say) an
    answer that carries the reason, so that the other kinds still answer."""
    try:
        return largest_batch(predictor, kind, seq_len, usable)
    except ModelError:
        raise  # the config itself cannot be built: bad input, not one kind's failure
    except Exception as error:  # torch, transformers and peft fail with exceptions of many types
        return FitAnswer(kind=kind, row=predictor.template(kind).format(b=1, s=seq_len), batch=0, predicted_bytes=0,
                         next_bytes=0, usable_bytes=usable, simulations=0, error=one_line_error(error))


def fit(predictor: Predictor, seq_len: int, budget: int, margin: float = STATED_MARGIN,
        kinds: tuple[str, ...] = tuple(KINDS), workers: int = 1) -> list[FitAnswer]:
    """Every kind's answer for one budget; with several workers, the kinds are searched side by side, each
    with a predictor of its own (no two kinds share a row, so each simulates the rows it would have)."""
    usable = usable_bytes(budget, margin)
    if workers > 1:  # started longest first (setups.START_ORDER), answered in the order asked
        started = sorted(kinds, key=START_ORDER.index)
        tasks = [(predictor.fresh(), kind, seq_len, usable) for kind in started]
        families = [_imports_peft(predictor.template(kind)) for kind in started]
        found = dict(zip(started, parallel.starmap(answer_or_reason, tasks, workers, families), strict=True))
        return [found[kind] for kind in kinds]
    return [answer_or_reason(predictor, kind, seq_len, usable) for kind in kinds]


def _imports_peft(template: str) -> bool:
    """Whether a set-up's simulation imports peft or bitsandbytes (LoRA, whose peft imports bitsandbytes; a 4-bit
    base; the 8-bit AdamW): a quarter of a second the first time in a process (exact/run.py's _uncompiled_imports),
    and what they learn of LoRA's operators, so such set-ups are run by one worker where they can (parallel.py's
    families)."""
    row = parse_row(template.format(b=1, s=1))
    return bool(row.lora_rank) or uses_bitsandbytes(row)
