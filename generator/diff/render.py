"""Renderers of a Comparison: an aligned terminal table, Markdown for a pull request, JSON for scripts.

Values that come from result files (environment strings, row ids, failure reasons) are escaped for the place
they land: rich Text objects on the terminal (no markup is interpreted), Markdown escapes in Markdown."""

import json
from dataclasses import asdict

from rich.console import Console
from rich.table import Table
from rich.text import Text

from generator.diff.compare import WORSE, Comparison, RowDiff, Side, Verdict, signed_size
from generator.escaping import markdown_code, markdown_text, plain_terminal_text
from generator.units import format_mib, mib_spread, signed_mib, signed_percent

# A comparison's columns, by name, each with the header a reader sees; logic selects columns by name.
HEADERS = {"row": "row", "before": "before", "after": "after", "change": "change", "change_percent": "change %",
           "threshold": "threshold", "peak_phase": "peak phase", "moved_most": "moved most", "verdict": "verdict",
           "tensors": "tensors (exact)"}
COLUMNS = tuple(HEADERS.values())


def _net(side: Side | None) -> str:
    if side is None:
        return "–"
    if side.status != "ok":
        return side.status.upper()
    spread = f" ({mib_spread(side.min_bytes, side.max_bytes, side.repeats == 2)})" if side.repeats > 1 else ""
    return f"{format_mib(side.net_bytes)}{spread}"


def cells(row: RowDiff) -> list[str]:
    """One row's cells as plain text, shared by the terminal and Markdown renderers."""
    compared = row.compared
    phases = "–"
    if row.before and row.after and row.before.peak_phase:
        phases = row.before.peak_phase if row.before.peak_phase == row.after.peak_phase else (
            f"{row.before.peak_phase} → {row.after.peak_phase}")
    verdict = f"{row.verdict} ({row.reason})" if row.reason else row.verdict
    if row.judged_on:
        verdict += f" (judged on {row.judged_on})"
    return [
        row.row, _net(row.before), _net(row.after),
        signed_mib(row.change_bytes) if compared else "–",
        signed_percent(row.change) if compared else "–",
        f"{row.threshold * 100:.1f} % ({row.threshold_source})" if compared else "–",
        phases, row.moved_most or "–", verdict, _tensor(row),
    ]


def _tensor(row: RowDiff) -> str:
    """'same', or '+12 MiB (activations and temporaries); below the noise'."""
    tensor = row.tensor
    if tensor is None:
        return "–"
    text = "same" if tensor.verdict == Verdict.SAME else (
        f"{signed_size(tensor.change_bytes)} ({tensor.moved_most.split(' (')[0]})" if tensor.moved_most
        else signed_size(tensor.change_bytes))
    return f"{text}; {SHORT.get(tensor.disagrees, tensor.disagrees)}" if tensor.disagrees else text


# The flags of TensorChange.disagrees, short enough for a table cell (JSON keeps the sentence).
SHORT = {"the tensors moved by less than the measurement can see": "below the noise",
         "the tensors moved beyond the measured threshold, the measurement did not": "measurement did not move",
         "the measurement moved, the tensors did not: the allocator or the process, not the tensors":
             "not the tensors"}


def _preamble(comparison: Comparison) -> list[str]:
    lines = [f"{comparison.model}: {comparison.before} → {comparison.after}"]
    for key, old, new in comparison.library_changes:
        lines.append(f"{key}: {old} → {new}")
    if comparison.differences:
        lines.append("these set-ups also differ in more than library versions:")
        lines += [f"  {key}: {old} → {new}" for key, old, new in comparison.differences]
    return lines


def _summary(comparison: Comparison) -> str:
    worse = comparison.worse
    if worse:
        return f"{len(worse)} row(s) got worse: {', '.join(row.row for row in worse)}"
    return "no row got worse beyond its threshold"


def render_terminal(comparison: Comparison, console: Console) -> None:
    """An aligned table; every value is Text, so nothing in a file can restyle the output."""
    for line in _preamble(comparison):
        console.print(Text(plain_terminal_text(line)))
    table = Table(*COLUMNS, show_lines=False)
    table.columns[0].no_wrap = True
    for column in table.columns[1:6]:
        column.justify = "right"
    for row in comparison.rows:
        style = "red" if row.verdict in WORSE else "green" if row.verdict == Verdict.LESS else ""
        table.add_row(*[Text(plain_terminal_text(cell)) for cell in cells(row)], style=style)
    console.print(table)
    console.print(Text(_summary(comparison)))


def render_markdown(comparison: Comparison) -> str:
    """A GitHub-flavoured table with the differences between the set-ups above it."""
    lines = [markdown_text(line) + "  " for line in _preamble(comparison)]
    lines += ["", "| " + " | ".join(COLUMNS) + " |", "|---|" + "---:|" * 5 + "---|---|---|---|"]
    for row in comparison.rows:
        text = cells(row)
        lines.append("| " + " | ".join([markdown_code(text[0], table=True),
                                        *[markdown_text(cell) for cell in text[1:]]]) + " |")
    lines += ["", markdown_text(_summary(comparison)), ""]
    return "\n".join(lines)


def render_json(comparison: Comparison) -> str:
    """Everything the comparison holds, for scripts."""
    document = asdict(comparison)
    document["worse"] = [row.row for row in comparison.worse]
    return json.dumps(document, indent=2, sort_keys=True) + "\n"
