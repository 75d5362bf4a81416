"""The simulation against peaks others published on GPUs (generator/store/published.py): each entry's error
against its band, and QLoRA's allowance.

An entry's error is predicted / published - 1, its prediction being the GPU program's simulated tensor peak,
the figure `torch.cuda.max_memory_allocated()` reports. Nothing here is fitted to a published figure, except
the allowance, which says so: the factor by which published QLoRA peaks exceeded the simulated ones once the
cause that was found (bitsandbytes before 0.43.2 keeping each 4-bit layer's input, the ``bnb042`` program) is
simulated. It is the largest such factor over the QLoRA entries, so no QLoRA entry is left under its figure,
and each entry is also judged against the factor the other entries alone give (leave-one-out)."""

import math
from dataclasses import dataclass
from pathlib import Path

from generator.matrix import Mode, parse_row
from generator.store.published import Entry, Predicted, PredictedFile, load_predicted, load_suite, suite_root

PPM = 1_000_000  # an allowance is whole parts per million, so that the page's calculator applies it to the byte

KINDS = ("full", "lora", "qlora", "generate", "sharded")  # in the page's order
PLAIN = ("full", "lora", "generate")  # one card, the installed libraries' programs


def kind(entry: Entry) -> str:
    """An entry's recipe, as the page groups it: a sharded card, QLoRA, LoRA, generation or full training."""
    row = parse_row(entry.row)
    if row.sharding:
        return "sharded"
    if row.quantization:
        return "qlora"
    if row.lora_rank:
        return "lora"
    return "generate" if row.mode == Mode.GENERATE else "full"


@dataclass(frozen=True)
class Judged:
    """One entry beside what the simulator answered for it."""

    entry: Entry
    kind: str
    predicted: Predicted | None  # None: not recorded, or recorded for another row or config (stale)
    error: float | None  # predicted / published - 1; None without a prediction

    @property
    def within(self) -> bool:
        low, high = self.entry.band
        return self.error is not None and low <= self.error <= high


def judge(entries: list[Entry], predicted: PredictedFile | None) -> list[Judged]:
    """Each entry with its recorded prediction, where one was recorded for the entry's row and config."""
    recorded = {p.id: p for p in predicted.entries} if predicted else {}
    judged = []
    for entry in entries:
        found = recorded.get(entry.id)
        if found is not None and (found.row != entry.row or found.config != entry.config_digest or found.error):
            found = None
        error = found.gpu_tensor_peak_bytes / entry.published_bytes - 1 if found else None
        judged.append(Judged(entry=entry, kind=kind(entry), predicted=found, error=error))
    return judged


@dataclass(frozen=True)
class Allowance:
    """QLoRA's allowance: multiply a simulated QLoRA tensor peak by ``factor`` for a figure no published QLoRA
    peak exceeded."""

    factor: float  # the largest published / predicted over the QLoRA entries
    ppm: int  # the factor in parts per million, rounded up: what an answer multiplies by (allowed)
    entries: int
    worst: str  # the entry that sets it
    held_out_under: tuple[tuple[str, float], ...]  # entries the other entries' factor leaves under, by how much


def qlora_allowance(judged: list[Judged]) -> Allowance | None:
    """The allowance from every QLoRA entry that has a prediction; None with fewer than two."""
    ratios = {j.entry.id: 1 / (1 + j.error) for j in judged if j.kind == "qlora" and j.error is not None}
    if len(ratios) < 2:
        return None
    worst = max(ratios, key=lambda name: ratios[name])
    under = []
    for name, ratio in ratios.items():
        others = max(value for other, value in ratios.items() if other != name)
        if others < ratio:
            under.append((name, others / ratio - 1))
    factor = max(1.0, ratios[worst])
    return Allowance(factor=factor, ppm=math.ceil(factor * PPM), entries=len(ratios), worst=worst,
                     held_out_under=tuple(under))


def allowed(n_bytes: int, ppm: int) -> int:
    """A simulated figure with an allowance of ``ppm`` parts per million on it, rounded up to the byte."""
    return -(-n_bytes * ppm // PPM)


def row_ppm(row_id: str, qlora_ppm: int) -> int:
    """The allowance on a GPU row's simulated reserve, per million: QLoRA's (``qlora_ppm``) for a 4-bit row, whose
    published peaks the simulation fell short of, and none for any other, whose peaks it matched."""
    return qlora_ppm if is_qlora(row_id) else PPM


def is_qlora(row_id: str) -> bool:
    """Whether a row trains on a 4-bit base: the rows QLoRA's allowance is for."""
    return bool(parse_row(row_id).quantization)


def suite_allowance(measurements: Path) -> Allowance | None:
    """QLoRA's allowance from the published suite beside these measurements, or the suite shipped with the tool
    where they have none (store/published.py suite_root); None where neither has QLoRA entries with predictions."""
    root = suite_root(measurements)
    return qlora_allowance(judge(load_suite(root), load_predicted(root)))


def qlora_ppm(measurements: Path, target: str) -> int:
    """QLoRA's allowance for a target, per million: on a GPU the suite's (suite_allowance), none on a CPU, where
    QLoRA's peaks are measured and predicted exact."""
    found = suite_allowance(measurements) if target.startswith("gpu") else None
    return found.ppm if found else PPM
