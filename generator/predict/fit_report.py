"""How `fit` reports: a table per budget for people, JSON for scripts, and --confirm's real measurements."""

import json
import os
from dataclasses import asdict
from pathlib import Path

from generator.budget import ProcessModel
from generator.escaping import plain_terminal_text
from generator.matrix import parse_row
from generator.measure.matrix_run import MeasureRequest, measure_rows
from generator.model_source import ModelSource
from generator.store.fit_table import FitAnswer
from generator.units import format_mib, format_mib_above, format_size


def render_text(answers: list[FitAnswer], model: str, budget: int, margin: float, process: ProcessModel) -> str:
    """'full training: batch 12 (5.9 GiB; batch 13 needs 6.4 GiB)' per kind."""
    lines = [f"{model} in {format_size(budget)}, {margin:.0%} kept free: {format_size(answers[0].usable_bytes)} usable"]
    for answer in answers:
        if answer.error:
            lines.append(f"  {answer.kind}: not simulated: {answer.error}")
            continue
        if answer.batch == 0:
            lines.append(f"  {answer.kind}: does not fit; batch 1 needs "
                         f"{format_mib_above(answer.predicted_bytes, answer.usable_bytes)}")
            continue
        following = (f"batch {answer.batch + 1} needs {format_mib_above(answer.next_bytes, answer.usable_bytes)}"
                     if answer.next_bytes else "the largest batch the tool simulates")
        lines.append(f"  {answer.kind}: batch {answer.batch} ({answer.row}, {format_mib(answer.predicted_bytes)}; "
                     f"{following})")
    lines.append(f"  {process.describe()}")
    return "".join(plain_terminal_text(line) + "\n" for line in lines)  # a model's name is data


def render_json(answers: list[FitAnswer], model: str, budget: int, margin: float, process: ProcessModel) -> str:
    """One object per kind."""
    return json.dumps([{**asdict(answer), "model": model, "budget_bytes": budget, "margin": margin,
                        "process_model": process.describe()} for answer in answers],
                      indent=2, sort_keys=True) + "\n"


def confirm(answers: list[FitAnswer], source: ModelSource, measurements: Path) -> str:
    """Measure two real steps at each answer and the next batch up, where both fit in this machine."""
    room = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") * 0.8
    rows = []
    for answer in answers:
        if answer.batch and answer.next_bytes and answer.next_bytes < room:
            rows += [parse_row(answer.row), parse_row(answer.row.replace(f"-b{answer.batch}-",
                                                                         f"-b{answer.batch + 1}-"))]
    if not rows:
        return "--confirm: no answer fits this machine twice over; nothing measured\n"
    request = MeasureRequest(rows=tuple(rows), model=source, output=measurements, repeats=1, repeats_explicit=True)
    report = measure_rows(request)
    lines = ["--confirm, two real steps each (net of imports):"]
    for result in report.written:
        summary = result.summary
        lines.append(f"  {result.row.id}: measured {format_mib(summary.net_peak_bytes)} ({summary.status})")
    return "\n".join(lines) + "\n"
