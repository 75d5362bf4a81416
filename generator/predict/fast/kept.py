"""The fast path of a question asked again: a row's parts found among the kept simulations by their key alone
(generator/store/simulations.py), and a config's checks answered from the checks kept for it, so that `predict` of
a row simulated once imports neither torch nor transformers (a second and a half of the three it took).

What it gives is what the reference path (generator/predict/simulate.py's simulate_kept_part) reads back for the
same key, field for field: a question that is not wholly kept here goes to that path. The key's library
versions come from each library's metadata and the simulator's hash from its modules' source text, neither an
import of the library or of the modules."""

from functools import cache
from importlib import metadata

from generator.matrix import RowSpec
from generator.measure.method import code_hash
from generator.model_source import ModelSource, check_causal_lm, config_hash
from generator.quantize import uses_bitsandbytes
from generator.store import simulations
from generator.store.records import CpuPart, CudaPart, Prediction, joined
from generator.store.simulations import CheckKey, SimulationKey

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
SIMULATOR_MODULES = ("generator.predict.simulate", "generator.answers.cuda_allocator", "generator.steps",
                     "generator.model_source", "generator.quantize",
                     *(f"generator.predict.exact.{name}" for name in
                       ("run", "parts", "fake_friendly", "cuda_program", "sharding", "tracker")),
                     *(f"generator.predict.fast.{name}" for name in
                       ("fake_mode", "fake_hits", "depth", "inserted_runs", "stack", "small_depths", "decode",
                        "batches")))
CHECK_MODULES = ("generator.model_source", "generator.libraries")  # the code of a config's checks


def simulation_key(row: RowSpec, source: ModelSource, program: str) -> SimulationKey:
    """What a kept part of this row is filed under: the config, the row, the program, the LoRA targets, the
    library versions and the simulator (its method and the hash of its code, so an edit is never served
    stale)."""
    return SimulationKey(config_sha256=source.config_sha256, row=row.id, lora_targets=" ".join(source.lora_targets),
                         libraries=_libraries(uses_bitsandbytes(row)),
                         simulator=f"{METHOD}; code {code_hash(SIMULATOR_MODULES)}", program=program)


@cache
def _libraries(with_bitsandbytes: bool) -> str:
    """The library versions a key names, each from the library's metadata, which its __version__ repeats (torch
    2.13.0+cpu): importing torch, transformers, peft and bitsandbytes costs a second or more that a kept answer would
    spend on its key alone. Read once a process: a read of the metadata takes half a millisecond."""
    names = ("torch", "transformers", "peft", *(("bitsandbytes",) if with_bitsandbytes else ()))
    return ", ".join(f"{name} {metadata.version(name)}" for name in names)


def kept_part(row: RowSpec, source: ModelSource, program: str, expandable: bool = True) -> CpuPart | CudaPart | None:
    """The part the reference path would read back for this row, or None where it would simulate (nothing
    kept, the cache off, or a CUDA part kept without the expandable reserve that is asked for)."""
    if simulations.cache_root() is None:
        return None
    found = simulations.load(simulation_key(row, source, program))
    if found is None or (expandable and isinstance(found, CudaPart) and found.cuda_expandable_bytes is None):
        return None
    return found


def kept_predictions(rows: list[RowSpec], source: ModelSource) -> list[Prediction] | None:
    """Every row's whole prediction from its two kept parts, or None unless every part is kept."""
    found = []
    for row in rows:
        cpu, cuda = kept_part(row, source, "cpu"), kept_part(row, source, "cuda")
        if not isinstance(cpu, CpuPart) or not isinstance(cuda, CudaPart):
            return None
        found.append(joined(cpu, cuda))
    return found


def kept_check(config: dict, where: str) -> int:
    """model_source's check_causal_lm, answered from the checks kept for this config under the installed
    transformers where it passed them once; a config that fails is refused by the checks themselves, every time."""
    if simulations.cache_root() is None:
        return check_causal_lm(config, where)
    key = CheckKey(config_sha256=config_hash(config), transformers=metadata.version("transformers"),
                   checker=code_hash(CHECK_MODULES))
    positions = simulations.load_check(key)
    if positions is None:
        positions = check_causal_lm(config, where)
        simulations.save_check(key, positions)
    return positions
