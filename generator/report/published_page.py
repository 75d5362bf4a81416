"""The page "Checked against published GPU measurements" (published.md), built from the suite in
measurements/_published/ and the answers `memory-budget published --record` wrote beside it: each entry's
published peak, the simulated GPU tensor peak for its recipe, the error against its band, its recipe and its
source, grouped by kind of recipe, with QLoRA's allowance and a chart of predicted against published.

Figures come from the files; the words are this module's. Every figure names its basis: published (with its
source and unit) or simulated GPU tensor peak."""

from dataclasses import dataclass
from pathlib import Path

from generator.answers.published import KINDS, PLAIN, Allowance, Judged, judge, qlora_allowance
from generator.store import published
from generator.units import GIB

TITLE = "Checked against published GPU measurements"
KIND_LABELS = {"full": "Full fine-tuning", "lora": "LoRA", "qlora": "QLoRA", "generate": "Generation",
               "sharded": "Sharded across cards"}


@dataclass(frozen=True)
class PublishedRow:
    id: str
    model: str  # the hub repository the config comes from
    row: str
    lora_targets: str
    recipe: str
    machine: str
    published: str  # as the source printed it, with its unit
    predicted: str  # the simulated GPU tensor peak, in the source's unit; "not simulated" without one
    error: str  # signed percent, or "-"
    verdict: str  # "within" | "over the band" | "under the band" | "not simulated"
    band: str
    differs: str
    source: str  # the source's title, for the row's link
    url: str


@dataclass(frozen=True)
class KindSection:
    kind: str
    label: str
    within: int
    rows: tuple[PublishedRow, ...]


@dataclass(frozen=True)
class SourceNote:
    title: str
    url: str
    repository: str
    path: str
    commit: str
    statistic: str
    unit: str
    data: str
    program: str


@dataclass(frozen=True)
class ChartPoint:
    id: str
    kind: str
    published_gib: float
    predicted_gib: float


@dataclass(frozen=True)
class PublishedPageContext:
    title: str
    libraries: str
    simulator: str
    entries: int
    simulated: int
    plain_within: int
    plain_total: int
    sections: tuple[KindSection, ...]
    sources: tuple[SourceNote, ...]
    allowance: Allowance | None
    allowance_percent: str  # "+23.5 %"
    held_out: tuple[tuple[str, str], ...]  # (entry, how far under) under the other QLoRA entries' allowance
    points: tuple[ChartPoint, ...]


def _in_unit(n_bytes: int, unit: str) -> str:
    return f"{n_bytes / published.UNITS[unit]:.2f} {unit}"


def _verdict(judged: Judged) -> str:
    if judged.error is None:
        return "not simulated"
    if judged.within:
        return "within"
    return "over the band" if judged.error > judged.entry.band[1] else "under the band"


def _row(judged: Judged) -> PublishedRow:
    entry, unit = judged.entry, judged.entry.source.unit
    low, high = entry.band
    return PublishedRow(
        id=entry.id, model=entry.hub, row=entry.row, lora_targets=entry.lora_targets.replace(",", ", "),
        recipe=entry.recipe, machine=entry.machine,
        published=f"{float(entry.published):.2f} {unit}",
        predicted=_in_unit(judged.predicted.gpu_tensor_peak_bytes, unit) if judged.predicted else "not simulated",
        error=f"{judged.error:+.1%}".replace("%", " %") if judged.error is not None else "-",
        verdict=_verdict(judged), band=f"{low:+.0%} / {high:+.0%}".replace("%", " %"),
        differs=entry.differs or entry.band_reason, source=entry.source.title, url=entry.source.url)


def _sources(judged: list[Judged]) -> tuple[SourceNote, ...]:
    seen = {j.entry.source.file: j.entry.source for j in judged}
    return tuple(SourceNote(title=s.title, url=s.url, repository=s.repository, path=s.path, commit=s.commit,
                            statistic=s.statistic, unit=s.unit, data=s.data, program=s.program)
                 for s in seen.values())


def build_published_page(measurements: Path) -> PublishedPageContext | None:
    """The page's context; None where the measurements folder holds no suite."""
    entries = published.load_suite(measurements)
    if not entries:
        return None
    answers = published.load_predicted(measurements)
    judged = judge(entries, answers)
    sections = tuple(KindSection(kind=kind, label=KIND_LABELS[kind], within=sum(j.within for j in group),
                                 rows=tuple(_row(j) for j in group))
                     for kind in KINDS if (group := [j for j in judged if j.kind == kind]))
    plain = [j for j in judged if j.kind in PLAIN]
    allowance = qlora_allowance(judged)
    return PublishedPageContext(
        title=TITLE, libraries=answers.libraries if answers else "", simulator=answers.simulator if answers else "",
        entries=len(judged), simulated=sum(j.error is not None for j in judged),
        plain_within=sum(j.within for j in plain), plain_total=len(plain), sections=sections,
        sources=_sources(judged), allowance=allowance,
        allowance_percent=f"{allowance.factor - 1:+.1%}".replace("%", " %") if allowance else "",
        held_out=tuple((name, f"{abs(under):.1%}".replace("%", " %")) for name, under in
                       (allowance.held_out_under if allowance else ())),
        points=tuple(ChartPoint(id=j.entry.id, kind=KIND_LABELS[j.kind],
                                published_gib=j.entry.published_bytes / GIB,
                                predicted_gib=j.predicted.gpu_tensor_peak_bytes / GIB)
                     for j in judged if j.predicted is not None))
