"""How `fit` reports: a table per budget for people, JSON for scripts, and --confirm's real measurements."""

import json
import os
from dataclasses import asdict
from pathlib import Path

from generator.answers.setups import RECIPES
from generator.budget import ProcessModel
from generator.escaping import plain_terminal_text
from generator.matrix import parse_row
from generator.measure.matrix_run import MeasureRequest, measure_rows
from generator.model_source import ModelSource
from generator.predict.fit import overhead_text
from generator.store.fit_table import FitAnswer
from generator.store.records import Summary
from generator.units import format_mib, format_mib_above, format_size


def cards_text(sharding: tuple[str, int] | None) -> str:
    """', each training set-up one card of 8 under zero3 (its batch is that card's)', or nothing."""
    if sharding is None:
        return ""
    return (f", each training set-up one card of {sharding[1]} under {sharding[0]} (its batch is that card's; "
            "sharding is arithmetic on the simulated storages, not validated on a device)")


def render_text(answers: list[FitAnswer], model: str, budget: int, margin: float, process: ProcessModel,
                target: str = "cpu", sharding: tuple[str, int] | None = None) -> str:
    """'full training: batch 12 (5.9 GiB; batch 13 needs 6.4 GiB)' per kind."""
    parameters = next((a.parameters for a in answers if a.parameters), 0)
    lines = [f"{model} ({parameters:,} parameters) in {format_size(budget)}, {margin:.0%} kept free: "
             f"{format_size(answers[0].usable_bytes)} usable{cards_text(sharding)}"]
    for answer in answers:
        kind = f"{answer.kind} ({RECIPES.get(answer.kind, answer.row)})"
        if answer.error:
            lines.append(f"  {kind}: not simulated: {answer.error}")
            continue
        if answer.batch == 0:
            lines.append(f"  {kind}: does not fit; batch 1 needs "
                         f"{format_mib_above(answer.predicted_bytes, answer.usable_bytes)}")
            continue
        following = (f"batch {answer.batch + 1} needs {format_mib_above(answer.next_bytes, answer.usable_bytes)}"
                     if answer.next_bytes else "the largest batch the tool simulates")
        lines.append(f"  {kind}: batch {answer.batch} ({answer.row}, {format_mib(answer.predicted_bytes)}; "
                     f"{following})")
    lines.append(f"  {overhead_text(process, target)}")
    return "".join(plain_terminal_text(line) + "\n" for line in lines)  # a model's name is data


def render_json(answers: list[FitAnswer], model: str, budget: int, margin: float, process: ProcessModel,
                target: str = "cpu", sharding: tuple[str, int] | None = None) -> str:
    """One object per kind."""
    return json.dumps([{**asdict(answer), "model": model, "budget_bytes": budget, "margin": margin,
                        "setup": RECIPES.get(answer.kind, ""), "target": target,
                        "sharding": sharding[0] if sharding else "", "gpus": sharding[1] if sharding else 1,
                        "overhead": overhead_text(process, target)}
                       for answer in answers],
                      indent=2, sort_keys=True) + "\n"


def confirm(answers: list[FitAnswer], source: ModelSource, measurements: Path, budget: int) -> str:
    """Measure two real steps at each answer and the next batch up, where both fit in this machine."""
    room = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8
    rows = []
    for answer in answers:
        if answer.batch and answer.next_bytes and answer.next_bytes < room:
            rows += [parse_row(answer.row), parse_row(answer.row).with_batch(answer.batch + 1)]
    if not rows:
        return "--confirm: no answer fits this machine twice over; nothing measured\n"
    request = MeasureRequest(rows=tuple(rows), model=source, output=measurements, repeats=1, repeats_explicit=True)
    report = measure_rows(request)
    measured = {result.row.id: result.summary for result in report.written}
    lines = ["--confirm, two real steps each (net of imports), against the budget:"]
    for answer in answers:
        for row_id in (answer.row, parse_row(answer.row).with_batch(answer.batch + 1).id):
            if row_id in measured:
                lines.append(f"  {row_id}: {verdict(measured[row_id], budget, row_id == answer.row)}")
    return "\n".join(plain_terminal_text(line) for line in lines) + "\n"


def verdict(summary: Summary, budget: int, is_answer: bool) -> str:
    """'measured 5,120 MiB: within the budget (1,024 MiB to spare)' or 'over it by 300 MiB'."""
    if not summary.ok:
        return f"{summary.status} in {summary.phase or 'start-up'}" + (": the answer did not run" if is_answer else "")
    net = summary.net_peak_bytes
    if net <= budget:
        return f"measured {format_mib(net)}: within the budget ({format_mib(budget - net)} to spare)"
    return f"measured {format_mib(net)}: over the budget by {format_mib(net - budget)}" + (
        ": the answer does not fit" if is_answer else ", as predicted")
