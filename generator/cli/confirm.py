"""`fit --confirm`: two real steps at each answer and at the next batch up, measured on this machine where both
fit in it, each judged against the budget. It runs measurements, so it is the command line's, not predict's."""

import os
from pathlib import Path

from generator.answers.fit import FitAnswer
from generator.escaping import plain_terminal_text
from generator.matrix import parse_row
from generator.measure.matrix_run import MeasureRequest, measure_rows
from generator.model_source import ModelSource
from generator.store.records import Summary
from generator.units import format_mib


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
