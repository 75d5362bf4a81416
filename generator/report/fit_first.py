"""The fit page's first screen: a line per config with its answers on the card most readers have (the article's
24 GiB example card) for the set-ups people run, each line a link to the config's tables; and the legend that
states each set-up's precision and recipe (generator/answers/setups.py), so that a batch never stands alone."""

from collections.abc import Callable
from dataclasses import dataclass

from generator.answers.fit import FitAnswer
from generator.answers.setups import BY_NAME, FIRST_SCREEN, SETUPS
from generator.budget import EXAMPLE_CARD_BYTES
from generator.escaping import heading_slug
from generator.units import format_gib, format_gib_above


@dataclass(frozen=True)
class FirstLine:
    """One config's answers on the likely card, and the anchor of its tables."""

    model: str
    anchor: str  # the heading's id, as a code host makes it
    answers: tuple[tuple[str, str], ...]  # (set-up, cell)


def heading(model: str, parameters_text: str) -> str:
    """A config's heading on the fit page: its name and parameter count."""
    return f"{model} ({parameters_text} parameters)"


def first_lines(on_card: list[FitAnswer], cell: Callable[[FitAnswer], str]) -> tuple[FirstLine, ...]:
    """Each config's answers on the example card (the GPU answers for that budget), for the first screen's
    set-ups, in their order."""
    lines = []
    for model in dict.fromkeys(answer.model for answer in on_card):
        mine = {answer.kind: answer for answer in on_card if answer.model == model}
        shown = tuple((kind, cell(mine[kind])) for kind in FIRST_SCREEN if kind in mine)
        lines.append(FirstLine(model, heading_slug(heading(model, f"{mine[shown[0][0]].parameters:,}"))
                               if shown else "", shown))
    return tuple(line for line in lines if line.answers)


def card_text() -> str:
    """'24 GiB': the likely card the first screen answers for."""
    return format_gib(EXAMPLE_CARD_BYTES, 0)


def legend(kinds: list[str]) -> tuple[tuple[str, str], ...]:
    """(set-up, precision and recipe) for the set-ups the tables show, in their declared order."""
    shown = set(kinds)
    return tuple((setup.name, BY_NAME[setup.name].recipe) for setup in SETUPS if setup.name in shown)


def cell(answer: FitAnswer) -> str:
    """'batch 12 (21.3 GiB)', or 'does not fit: 31.0 > 21.6 GiB': what batch 1 needs against the usable budget,
    after the margin, that it was judged against."""
    if answer.batch == 0:
        return (f"does not fit: {format_gib_above(answer.predicted_bytes, answer.usable_bytes).removesuffix(' GiB')}"
                f" > {format_gib(answer.usable_bytes)}")
    if answer.past_curve:  # the calculator's words too (templates/calculator.js)
        return (f"beyond the simulated curve (its largest batch, {answer.batch}, takes "
                f"{format_gib(answer.predicted_bytes)}): ask memory-budget fit --budget for this budget")
    limit = ", the tool's limit" if not answer.next_bytes else ""  # explained under the fit page's tables
    return f"batch {answer.batch} ({format_gib(answer.predicted_bytes)}){limit}"
