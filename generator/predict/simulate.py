"""Simulate a row's tensor memory with fake tensors: the same steps as the worker (generator/steps.py), on a
model built under PyTorch's FakeTensorMode, so no weight is allocated and no arithmetic is done.

A dispatch mode sees every tensor an operator returns and follows each new storage until it is freed
(a weakref finalizer), so it knows the bytes of live tensor storage at every moment: the tensor peak, the
phase that sets it, and how the peak splits into weights, gradients, AdamW state and activations and
temporaries. Gradients are recognised as they are accumulated, AdamW's moments once a step has made them;
buffers, the token batch and AdamW's scalar step counters count with activations and temporaries."""

import time
from dataclasses import dataclass, replace
from importlib import metadata
from typing import Any

from generator.answers.cuda_allocator import replay
from generator.escaping import one_line_error
from generator.matrix import Mode, RowSpec, batch_limit
from generator.measure.method import code_hash
from generator.model_source import ModelError, ModelSource, load_config
from generator.predict import batches, decode, depth, stack
from generator.predict.cuda_program import CPU, CUDA, Program
from generator.predict.fake_run import ModelFacts, _run, model_facts
from generator.predict.sharding import METHOD as SHARDING_METHOD
from generator.predict.sharding import per_card
from generator.predict.tracker import StorageTracker
from generator.quantize import import_bitsandbytes, uses_bitsandbytes
from generator.steps import Prepared
from generator.store import simulations
from generator.store.records import CpuPart, CudaPart, Prediction, joined
from generator.store.simulations import SimulationKey

# The simulator's method, recorded with each prediction and fit table; refresh simulates again what an older one
# made. "the real run's mask path": since sequences_unpacked (before it, GQA models were overcounted).
# "generate()'s last-position logits": since generation keeps one position of the prompt's logits, as generate()
# does (before it, every prompt position's logits were kept, 2.6x too cautious for a large vocabulary).
# "CUDA's program for GPU figures": since the GPU reserve replays a simulation of what CUDA runs (its SDPA backend,
# its autocast lists, bitsandbytes' fused update); before it, the CPU's program stood in for it.
# "AdamW's foreach update on CUDA": since the GPU's program updates every parameter at once, as torch's AdamW does
# on CUDA (before it, the CPU's loop held one parameter's temporaries: GPU reserves up to 17 % low at batch 1).
METHOD = ("FakeTensorMode, live tensor storages, the real run's mask path, generate()'s last-position logits, "
          "CUDA's program for GPU figures, AdamW's foreach update on CUDA")
# the modules whose code decides a simulation's figures: a kept simulation made by other code is not used
SIMULATOR_MODULES = ("generator.predict.simulate", "generator.predict.fake_run", "generator.answers.cuda_allocator",
                     "generator.steps",
                     "generator.predict.fake_friendly", "generator.predict.cuda_program",
                     "generator.model_source", "generator.quantize", "generator.predict.sharding",
                     "generator.predict.tracker", "generator.predict.depth", "generator.predict.inserted_runs",
                     "generator.predict.stack",
                     "generator.predict.decode",
                     "generator.predict.batches")
DEPTHS = 4  # the small depths the fast path simulates (generator/predict/depth.py), from FIRST_LAYERS
FIRST_LAYERS = (1, 2)
WORTH_LAYERS = 16  # below this, the small depths (10 layers in all, or 14) cost about what the full depth does
FALLBACK_EXPERTS = "; experts through transformers' grouped_mm fallback op (same outputs; its fake kernel takes fp32)"

PROGRAMS = {"cpu": CPU, "cuda": CUDA}  # a part's name -> the program it simulates
Simulated = tuple[StorageTracker, ModelFacts, bool]  # a finished run's tracker, the model's counts, and whether
# the experts went through transformers' fallback op


def decoded(row: RowSpec, source: ModelSource, program: Program,
            layers: int | None = None) -> tuple[StorageTracker, Prepared, bool] | None:
    """fake_run's _run of a generation row of many new tokens, written from two runs of a few
    (generator/predict/decode.py); None where it is not such a row, or their decode steps do not follow the
    rules."""
    if row.mode != Mode.GENERATE or row.new_tokens < 2 * decode.SHORT:
        return None
    early_marks: list[int] = []
    late_marks: list[int] = []
    early = _run(replace(row, new_tokens=decode.SHORT), source, program, layers, early_marks)
    late_row = replace(row, seq_len=row.seq_len + row.new_tokens - decode.SHORT, new_tokens=decode.SHORT)
    late = _run(late_row, source, program, layers, late_marks)
    journal = decode.extend(early[0].journal, early_marks, late[0].journal, late_marks, row.steps,
                            row.new_tokens)
    if journal is None or early[2] != late[2]:
        return None
    return StorageTracker.replay(journal), early[1], early[2]


def run_row(row: RowSpec, source: ModelSource, program: Program,
            layers: int | None = None) -> tuple[StorageTracker, Prepared, bool]:
    """The row's run at ``layers`` (the full depth if None): by the decode fast path where it answers, else
    every step run (fake_run's _run); the figures are the same."""
    return decoded(row, source, program, layers) or _run(row, source, program, layers)


def simulate_full(row: RowSpec, source: ModelSource, program: Program, fast: bool = True) -> Simulated:
    """The row's steps at the model's full depth, as the program runs them (with every decode step run,
    unless ``fast``: run_row)."""
    tracker, prepared, rerouted = (run_row if fast else _run)(row, source, program)
    return tracker, model_facts(prepared, row), rerouted


@dataclass(frozen=True)
class KnownShape:
    """How a row's stack repeats, read at one batch (depth.shape), with the model's counts the small depths gave."""

    first: int  # the first of the small depths
    shape: depth.Shape
    facts: tuple[ModelFacts, ModelFacts]  # at depths first and first + 1, which another batch's must equal
    full: ModelFacts  # at the full depth
    rerouted: bool


# The shapes read in this process, by config, LoRA targets, row but its batch, and program: another batch of the
# row needs two small depths instead of four (simulate_like). fit's search asks one row at several batches.
SHAPES: dict[tuple[Any, ...], KnownShape] = {}


def _shape_key(row: RowSpec, source: ModelSource, program: Program) -> tuple[Any, ...]:
    return source.config_sha256, source.lora_targets, replace(row, batch_size=0), program


def simulate_by_depth(row: RowSpec, source: ModelSource, program: Program,
                      worth: int = 0) -> Simulated | None:
    """The same as simulate_full, from another batch's shape of the row (simulate_like), else from the row's
    steps at four small depths (generator/predict/depth.py), starting from one layer, else from two (a stack of
    none is no start: its rotary tables, kept by no layer, are freed early), else from where the stack turns
    uniform; each start only where every layer past the small depths is like one they add (stack.py). None where
    the stack has fewer than ``worth`` layers, is too shallow for the small depths, or its trace does not
    repeat."""
    layers = load_config(source).num_hidden_layers
    if layers < worth:
        return None
    small = SmallDepths(row, source, program)
    found = simulate_like(row, source, program, small)
    if found is not None:
        return found
    for first in _firsts(source):
        if layers < first + DEPTHS + 1 or not stack.repeats_past(source, first, DEPTHS):
            continue  # too shallow to gain; a layer past the small depths that they never met
        found = _by_depth(row, source, program, layers, first, small)
        if found is not None:
            return found
    return None


def _firsts(source: ModelSource) -> tuple[int, ...]:
    """The layers the small depths may start from: where a stack that begins with layers of another kind turns
    uniform (stack.py; its small depths from an earlier layer would meet both kinds), then FIRST_LAYERS."""
    uniform = stack.uniform_from(source)
    return ((uniform,) if uniform is not None and uniform > FIRST_LAYERS[-1] else ()) + FIRST_LAYERS


class SmallDepths:
    """One row's runs at small depths, each run once however many paths ask for it: a batch that the shape
    of another does not serve goes on to the four depths with the first depth already run."""

    def __init__(self, row: RowSpec, source: ModelSource, program: Program) -> None:
        self.row, self.source, self.program = row, source, program
        self.done: dict[int, tuple[StorageTracker, Prepared, bool]] = {}

    def __call__(self, layers: int) -> tuple[StorageTracker, Prepared, bool]:
        if layers not in self.done:
            self.done[layers] = run_row(self.row, self.source, self.program, layers)
        return self.done[layers]


def simulate_like(row: RowSpec, source: ModelSource, program: Program,
                  small: SmallDepths | None = None) -> Simulated | None:
    """The same as simulate_full, from two small depths and the shape read at another batch of the row in this
    process (depth.extend_like); None where there is none, or it does not serve this batch."""
    known = SHAPES.get(_shape_key(row, source, program))
    if known is None:
        return None
    small = small or SmallDepths(row, source, program)
    runs = [small(known.first)]
    if not depth.names_like(known.shape, runs[0][0].journal):  # a batch that takes other paths
        return None
    runs.append(small(known.first + 1))
    facts = tuple(model_facts(prepared, row) for _, prepared, _ in runs)
    if facts != known.facts or any(rerouted != known.rerouted for _, _, rerouted in runs):
        return None
    layers = load_config(source).num_hidden_layers
    journal = depth.extend_like(known.shape, [tracker.journal for tracker, _, _ in runs], layers - known.first)
    return None if journal is None else (StorageTracker.replay(journal), known.full, known.rerouted)


def _by_depth(row: RowSpec, source: ModelSource, program: Program, layers: int, first: int,
              small: SmallDepths) -> Simulated | None:
    runs = []
    for extra in range(DEPTHS):  # a trace that does not repeat by its third depth costs no fourth
        runs.append(small(first + extra))
        if extra == 2 and not depth.repeats([tracker.journal for tracker, _, _ in runs]):
            return None
    journals = [tracker.journal for tracker, _, _ in runs]
    shape = depth.shape(journals)
    journal = None if shape is None else depth.extend_like(shape, journals[:2], layers - first)
    if shape is None or journal is None:
        return None
    facts = [model_facts(prepared, row) for _, prepared, _ in runs]
    counts = [depth.arithmetic([getattr(f, name) for f in facts], layers - first)
              for name in ("parameters", "trainable", "quantization_bytes")]
    if None in counts or any(f.whole != facts[-1].whole for f in facts[1:]):  # a stack whose layers differ
        return None
    deepest = facts[-1]
    full = ModelFacts(*counts[:2], deepest.lora_targets, counts[2], deepest.whole, deepest.experts)  # type: ignore
    SHAPES[_shape_key(row, source, program)] = KnownShape(first, shape, (facts[0], facts[1]), full, runs[-1][2])
    return StorageTracker.replay(journal), full, runs[-1][2]


def simulate_part(row: RowSpec, source: ModelSource, program: str) -> CpuPart | CudaPart:
    """The row's steps as one program runs them ("cpu": the tensor peak and its split, the CPU's figures;
    "cuda": the GPU's tensor peak, replayed through the caching allocator's rules); by depth where the stack's
    trace repeats, else at full depth; the figures are the same."""
    started = time.perf_counter()
    chosen = PROGRAMS[program]

    def at_batch(batch: int) -> Simulated:
        other = replace(row, batch_size=batch)
        return simulate_by_depth(other, source, chosen, WORTH_LAYERS) or simulate_full(other, source, chosen)

    tracker, facts, rerouted = batches.along(_shape_key(row, source, chosen), row.batch_size,
                                             batch_limit(row.seq_len), at_batch)
    method = METHOD + (FALLBACK_EXPERTS if rerouted and facts.experts else "")
    if row.sharding:
        method += f"; one card's share under {row.sharding} on {row.gpus} cards ({SHARDING_METHOD})"
    make = _cpu_part if program == "cpu" else _cuda_part
    return make(tracker, facts, row, method, time.perf_counter() - started)


def simulate(row: RowSpec, source: ModelSource) -> Prediction:
    """The row's steps twice, as the CPU runs them and as a GPU runs them: the whole prediction."""
    return joined(simulate_part(row, source, "cpu"), simulate_part(row, source, "cuda"))  # type: ignore[arg-type]


def _card(tracker: StorageTracker, facts: ModelFacts, row: RowSpec) -> tuple[int, str, dict, dict, list]:
    """The figures of a finished simulation: the whole run's, or for a sharded row one card's (sharding.py)."""
    if row.sharding:
        card = per_card(tracker, row, facts.whole)
        return card.peak, card.phase, card.split, card.phase_peaks, card.events
    return tracker.peak, tracker.peak_phase, tracker.peak_split, tracker.phase_peaks, tracker.events


def _counts(facts: ModelFacts, method: str, seconds: float) -> dict[str, Any]:
    return {"parameters": facts.parameters, "trainable_parameters": facts.trainable, "method": method,
            "seconds": seconds, "lora_targets": facts.lora_targets, "quantization_bytes": facts.quantization_bytes}


def _cpu_part(tracker: StorageTracker, facts: ModelFacts, row: RowSpec, method: str, seconds: float) -> CpuPart:
    """The CPU program's figures: its tensor peak, the phase and split of it, and each phase's peak."""
    peak, phase, split, phases, _ = _card(tracker, facts, row)
    return CpuPart(tensor_peak_bytes=peak, phase=phase, weights_bytes=split["weights"],
                   gradients_bytes=split["gradients"], optimizer_bytes=split["optimizer"],
                   activations_bytes=split["activations"], phase_peak_bytes=dict(phases),
                   **_counts(facts, method, seconds))


def _cuda_part(tracker: StorageTracker, facts: ModelFacts, row: RowSpec, method: str, seconds: float) -> CudaPart:
    """The GPU program's tensor peak and phase, and the caching allocator's reserves replaying it."""
    peak, phase, _, _, events = _card(tracker, facts, row)
    return CudaPart(cuda_tensor_peak_bytes=peak, cuda_phase=phase, cuda_reserved_bytes=replay(events).peak_reserved,
                    cuda_expandable_bytes=replay(events, expandable=True).peak_reserved,
                    **_counts(facts, method, seconds))


def simulation_key(row: RowSpec, source: ModelSource, program: str) -> SimulationKey:
    """What a kept part of this row is filed under: the config, the row, the program, the LoRA targets, the
    library versions and the simulator (its method and the hash of its code, so an edit is never served
    stale)."""
    import torch
    import transformers

    # peft's version from its metadata: importing peft (and the bitsandbytes it loads) costs seconds that a row
    # without adapters would spend on its key alone
    libraries = f"torch {torch.__version__}, transformers {transformers.__version__}, peft {metadata.version('peft')}"
    if uses_bitsandbytes(row):
        libraries += f", bitsandbytes {import_bitsandbytes().__version__}"
    return SimulationKey(config_sha256=source.config_sha256, row=row.id, lora_targets=" ".join(source.lora_targets),
                         libraries=libraries, simulator=f"{METHOD}; code {code_hash(SIMULATOR_MODULES)}",
                         program=program)


def simulate_kept_part(row: RowSpec, source: ModelSource, program: str) -> CpuPart | CudaPart:
    """simulate_part, or the same part kept on disk from an earlier run (generator/store/simulations.py)."""
    key = simulation_key(row, source, program)
    found = simulations.load(key)
    if found is None:
        found = simulate_part(row, source, program)
        simulations.save(key, found)
    return found


def simulate_kept(row: RowSpec, source: ModelSource) -> Prediction:
    """simulate, from its two parts, each simulated or kept."""
    return joined(simulate_kept_part(row, source, "cpu"), simulate_kept_part(row, source, "cuda"))  # type: ignore


def try_simulate(row: RowSpec, source: ModelSource) -> tuple[Prediction | None, str]:
    """simulate, with a row that cannot run (no LoRA targets, an operator the fake tensors cannot take) as
    that row's one-line reason, so the other rows still print. A config that cannot be built at all is the
    model's fault, not the row's: ModelError goes on to the command line as bad input."""
    try:
        return simulate_kept(row, source), ""
    except ModelError:
        raise
    except Exception as error:  # torch, transformers and peft fail with exceptions of many types
        return None, one_line_error(error)
