"""The pages' charts, drawn with Altair from the contexts and rendered offline to SVG by vl-convert.

Every chart has a transparent background and mid-grey text, so it reads on a light page, a dark page and a
code host's dark theme alike; they are drawn narrow with large type, so they stay legible scaled to a phone."""

from typing import Any

import altair as alt
import vl_convert

from generator.report.article import PageContext
from generator.report.history import HistoryContext
from generator.report.versions import VersionsContext
from generator.units import MIB

COMPONENT_ORDER = ["weights", "gradients", "AdamW state", "activations and the rest"]
WIDTH = 440
INK = "#7f7f7f"  # at least 3.9:1 against white and against the dark page's background
GRID = "#8080804d"


def styled(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """The shared look: transparent, grey ink, type large enough to survive scaling to a phone."""
    # padding: vl-convert measures labels with its own font, a browser draws them with the reader's
    return (chart.properties(padding={"left": 36, "right": 16, "top": 6, "bottom": 6})
            .configure(background="transparent", font="system-ui, sans-serif")
            .configure_axis(labelColor=INK, titleColor=INK, gridColor=GRID, domainColor=INK, tickColor=INK,
                            labelFontSize=13, titleFontSize=13)
            .configure_legend(labelColor=INK, labelFontSize=13, titleColor=INK)
            .configure_title(color=INK, fontSize=15, anchor="start")
            .configure_view(stroke=None))


def memory_by_row(context: PageContext) -> alt.Chart:
    """A stacked bar per row: what P × bytes predicts (weights, gradients, AdamW state) and the rest."""
    records = [{"row": row.id, "component": part.name, "MiB": part.n_bytes / MIB,
                "order": COMPONENT_ORDER.index(part.name)}
               for row in context.rows if row.ok for part in row.components]
    order = [row.id for row in context.rows if row.ok]
    return alt.Chart(alt.Data(values=records), title="Where each row's peak goes").mark_bar().encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=220)),
        x=alt.X("sum(MiB):Q", title="net peak, MiB"),
        color=alt.Color("component:N", sort=COMPONENT_ORDER, title=None,
                        legend=alt.Legend(orient="bottom", columns=2)),
        order=alt.Order("order:Q"), tooltip=["row:N", "component:N", alt.Tooltip("MiB:Q", format=",.0f")],
    ).properties(width=WIDTH - 160)


def peak_vs_tokens(context: PageContext) -> alt.TopLevelMixin:
    """Net peak against tokens per step, with the least-squares line over plain training rows."""
    points: list[dict[str, Any]] = [{"tokens": row.tokens, "MiB": row.net.n_bytes / MIB, "row": row.id,
               "kind": _token_series(row.mode, row.seq_len, context)}
              for row in context.rows if row.net and row.dtype == "float32"
              and not row.gradient_checkpointing and not row.lora_rank]
    scatter = alt.Chart(alt.Data(values=points)).mark_point(strokeWidth=2.5).encode(
        x=alt.X("tokens:Q", title="tokens per step (batch × length)"), y=alt.Y("MiB:Q", title="net peak, MiB"),
        color=alt.Color("kind:N", title=None, legend=alt.Legend(orient="bottom", columns=1)),
        shape=alt.Shape("kind:N", title=None),
        # rows at another length are drawn as large rings, so a point of the same tokens never hides them
        size=alt.condition(alt.datum.kind == "training (fitted)", alt.value(70), alt.value(320)),
        fill=alt.condition(alt.datum.kind == "training (fitted)", alt.Fill("kind:N", legend=None),
                           alt.value("transparent")),
        tooltip=["row:N", alt.Tooltip("MiB:Q", format=",.0f")],
    )
    layers = [scatter]
    fit = context.findings.fit
    if fit is not None:
        xs = [0, max(p["tokens"] for p in points)]
        line = [{"tokens": x, "MiB": (fit.intercept.n_bytes + fit.per_token.n_bytes * x) / MIB} for x in xs]
        layers.insert(0, alt.Chart(alt.Data(values=line)).mark_line(strokeDash=[4, 3], color="#666").encode(
            x="tokens:Q", y="MiB:Q"))
    return alt.layer(*layers, title="Peak against tokens per step").properties(width=WIDTH - 60, height=260)


def _token_series(mode: str, seq_len: int, context: PageContext) -> str:
    fit_length = context.rows[0].seq_len if context.rows else seq_len
    if mode in ("inference", "generate"):
        return mode
    return "training (fitted)" if seq_len == fit_length else f"training at length {seq_len}"


def fixes(context: PageContext) -> alt.TopLevelMixin:
    """Plain batch-8 training against the three fixes."""
    found = context.findings
    comparisons = [c for c in (found.checkpointing, found.half_precision, found.lora, found.allocator)
                   if c is not None]
    if not comparisons:
        return alt.Chart(alt.Data(values=[])).mark_bar()
    plain = comparisons[0].reference
    bars = [{"row": plain.id, "MiB": plain.net.n_bytes / MIB if plain.net else 0,
             "label": plain.net.text if plain.net else ""}]
    bars += [{"row": c.subject.id, "MiB": c.subject.net.n_bytes / MIB if c.subject.net else 0,
              "label": f"{c.subject.net.text if c.subject.net else ''} ({c.change.text})"} for c in comparisons]
    order = [str(bar["row"]) for bar in bars]
    base = alt.Chart(alt.Data(values=bars), title="Fixes against plain batch-8 training")
    return alt.layer(
        base.mark_bar().encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=220)),
                               x=alt.X("MiB:Q", title="net peak, MiB", scale=alt.Scale(nice=True))),
        base.mark_text(align="left", dx=4, color=INK, fontSize=12).encode(y=alt.Y("row:N", sort=order), x="MiB:Q",
                                                                          text="label:N"),
    ).properties(width=WIDTH - 220)


def versions_chart(context: VersionsContext) -> alt.TopLevelMixin:
    """Each row's change against the newest set-up, one colour per release, with zero marked and each row's
    threshold drawn as a grey band: a dot inside it reads `same`."""
    points = [{"release": label, "row": row, "change %": change * 100, "low": -threshold * 100,
               "high": threshold * 100} for label, row, change, threshold in context.changes]
    rows = list(dict.fromkeys(str(point["row"]) for point in points))
    band = alt.Chart(alt.Data(values=points)).mark_bar(color="#bbbbbb", opacity=0.35, height=10).encode(
        y=alt.Y("row:N", sort=rows, title=None), x="low:Q", x2="high:Q")
    dots = alt.Chart(alt.Data(values=points)).mark_point(size=70, filled=True).encode(
        y=alt.Y("row:N", sort=rows, title=None),
        x=alt.X("change %:Q", title=["change of net peak against the newest, %", "(grey: the row's threshold)"]),
        color=alt.Color("release:N", title=None, legend=alt.Legend(orient="bottom", columns=1, labelLimit=400)),
        shape=alt.Shape("release:N", title=None), tooltip=["release:N", "row:N", "change %:Q"])
    zero = alt.Chart(alt.Data(values=[{"x": 0}])).mark_rule(color="#888").encode(x="x:Q")
    return alt.layer(band, zero, dots, title="Net peak by release, against the newest").properties(
        width=WIDTH - 180)


def history_chart(history: HistoryContext) -> alt.TopLevelMixin:
    """Each row's simulated tensor peak by release, oldest first, as asv draws a benchmark's history."""
    points = [{"row": row, "release": release, "MiB": mib} for row, release, mib in history.points]
    stepped = {(step.row, step.after) for step in history.steps}
    marks = [point for point in points if (point["row"], point["release"]) in stepped]
    x = alt.X("release:O", sort=list(history.releases), title="transformers release",
              axis=alt.Axis(labelAngle=-45))
    lines = alt.Chart(alt.Data(values=points)).mark_line(point=True).encode(
        x=x, y=alt.Y("MiB:Q", title="simulated tensor peak, MiB"), color=alt.Color("row:N", title=None),
        tooltip=["row:N", "release:O", alt.Tooltip("MiB:Q", format=",.1f")])
    layers = [lines]
    if marks:
        layers.append(alt.Chart(alt.Data(values=marks)).mark_point(shape="diamond", size=160, filled=False,
                                                                   strokeWidth=2).encode(x=x, y="MiB:Q"))
    return alt.layer(*layers, title="Tensor peak by transformers release (steps of 1 % or more marked)").properties(
        width=WIDTH - 200, height=320)


def to_svg(chart: alt.TopLevelMixin) -> str:
    """A chart as SVG text, rendered offline."""
    return vl_convert.vegalite_to_svg(styled(chart).to_json())


def render_svgs(context: PageContext) -> dict[str, str]:
    """Every chart as SVG text, keyed by its file name."""
    charts = {"memory-by-row.svg": memory_by_row(context), "peak-vs-tokens.svg": peak_vs_tokens(context),
              "fixes.svg": fixes(context)}
    return {name: to_svg(chart) for name, chart in charts.items()}
