"""The article's first screen: "will it fit?" for the measured model and for the worked example's 7B model on a
24 GiB card, from the same computation as the fit page (generator/report/fit_page.py: the simulated curves, the
CUDA caching allocator replay, the context allowance and the page's margin), so the two never disagree."""

from dataclasses import dataclass

from generator.answers.fit import STATED_MARGIN
from generator.answers.setups import FIRST_SCREEN
from generator.budget import EXAMPLE_CARD_BYTES, ProcessModel
from generator.report.example import SimulatedLine, example_usable_bytes, simulated_lines
from generator.report.fit_page import CPU_BUDGETS_GIB, Budget, cell, percent, site_answers
from generator.store.fit_table import FitTable
from generator.units import GIB, format_gib

FIRST_KINDS = FIRST_SCREEN  # the measured model's answers, in this order (generator/answers/setups.py)


@dataclass(frozen=True)
class KindAnswer:
    """One way of running the measured model, on the card."""

    kind: str
    cell: str  # "batch 8 (20.6 GiB)" or "does not fit: 31.0 > 21.6 GiB"


@dataclass(frozen=True)
class FirstAnswer:
    """What the first screen says, each value from the fit page's computation."""

    card: str  # "24 GiB"
    margin: str  # "10 %"
    seq_len_text: str
    model: str
    answers: tuple[KindAnswer, ...]
    large_model: str
    large_lines: tuple[SimulatedLine, ...]
    card_argument: str = ""  # "24GiB": the same card, as `fit --budget` takes it
    cpu_argument: str = ""  # "64GiB": the fit page's larger CPU machine
    usable: str = ""  # "21.6 GiB": the card less the margin, what a line is judged against
    install: str = ""  # "torch==2.13.0 transformers==5.24.0 ...": the versions the answers were simulated under


def pinned_install(fit_table: FitTable) -> str:
    """The pip requirements of the libraries the curves were simulated under (their table's libraries and
    bitsandbytes), so that "for your own model" simulates the program the page shows, not the registry's newest."""
    pairs = [item.split(" ", 1) for item in fit_table.libraries.split(", ") if item.count(" ") == 1]
    if fit_table.bitsandbytes:
        pairs.append(["bitsandbytes", fit_table.bitsandbytes])
    return " ".join(f"{name}=={version.split('+')[0]}" for name, version in pairs)


def first_answer(fit_table: FitTable | None, model: str, process: ProcessModel) -> FirstAnswer | None:
    """The measured model's batches on the example's card, and the example's model in its set-ups; None where
    no curves were simulated for this build's library versions."""
    if fit_table is None:
        return None
    card = Budget(f"{format_gib(EXAMPLE_CARD_BYTES, 0)} GPU", EXAMPLE_CARD_BYTES, "gpu", STATED_MARGIN)
    found = {answer.kind: answer for _, answer in site_answers(fit_table, process, (card,)) if answer.model == model}
    answers = tuple(KindAnswer(kind, cell(found[kind])) for kind in FIRST_KINDS if kind in found)
    first_per_task: dict[str, SimulatedLine] = {}
    for line in simulated_lines(fit_table):  # each task's first line is its smallest shape
        first_per_task.setdefault(line.task, line)
    return FirstAnswer(card=format_gib(EXAMPLE_CARD_BYTES, 0), margin=percent(STATED_MARGIN),
                       seq_len_text=f"{fit_table.seq_len:,}", model=model, answers=answers,
                       large_model=fit_table.example[0].model if fit_table.example else "",
                       large_lines=tuple(first_per_task.values()),
                       card_argument=f"{EXAMPLE_CARD_BYTES // GIB}GiB", cpu_argument=f"{CPU_BUDGETS_GIB[-1]}GiB",
                       usable=format_gib(example_usable_bytes()), install=pinned_install(fit_table))
