"""The page's three charts, drawn with Altair from the context and rendered offline to SVG by vl-convert."""

from typing import Any

import altair as alt
import vl_convert

from generator.context import PageContext
from generator.units import MIB
from generator.versions import VersionsContext

COMPONENT_ORDER = ["weights", "gradients", "AdamW state", "activations and the rest"]
WIDTH = 680


def memory_by_row(context: PageContext) -> alt.Chart:
    """A stacked bar per row: what P × bytes predicts (weights, gradients, AdamW state) and the rest."""
    records = [{"row": row.label, "component": part.name, "MiB": part.n_bytes / MIB,
                "order": COMPONENT_ORDER.index(part.name)}
               for row in context.rows if row.ok for part in row.components]
    order = [row.label for row in context.rows if row.ok]
    return alt.Chart(alt.Data(values=records), title="Where each row's peak goes (net of imports)").mark_bar().encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
        x=alt.X("sum(MiB):Q", title="MiB"),
        color=alt.Color("component:N", sort=COMPONENT_ORDER, title=None, legend=alt.Legend(orient="bottom")),
        order=alt.Order("order:Q"),
    ).properties(width=WIDTH - 200)


def peak_vs_tokens(context: PageContext) -> alt.TopLevelMixin:
    """Net peak against tokens per step, with the least-squares line over plain training rows."""
    points: list[dict[str, Any]] = [{"tokens": row.tokens, "MiB": row.net.n_bytes / MIB, "row": row.id,
               "kind": _token_series(row.mode, row.seq_len, context)}
              for row in context.rows if row.net and row.dtype == "float32"
              and not row.gradient_checkpointing and not row.lora_rank]
    scatter = alt.Chart(alt.Data(values=points)).mark_point(size=80, filled=True).encode(
        x=alt.X("tokens:Q", title="tokens per step (batch × length)"), y=alt.Y("MiB:Q", title="net peak, MiB"),
        color=alt.Color("kind:N", title=None, legend=alt.Legend(orient="bottom")),
        shape=alt.Shape("kind:N", title=None), tooltip=["row:N", "MiB:Q"],
    )
    layers = [scatter]
    fit = context.findings.fit
    if fit is not None:
        xs = [0, max(p["tokens"] for p in points)]
        line = [{"tokens": x, "MiB": (fit.intercept.n_bytes + fit.per_token.n_bytes * x) / MIB} for x in xs]
        layers.insert(0, alt.Chart(alt.Data(values=line)).mark_line(strokeDash=[4, 3], color="#666").encode(
            x="tokens:Q", y="MiB:Q"))
    return alt.layer(*layers, title="Peak against tokens per step").properties(width=WIDTH - 120, height=260)


def _token_series(mode: str, seq_len: int, context: PageContext) -> str:
    fit_length = context.rows[0].seq_len if context.rows else seq_len
    if mode == "inference":
        return "inference"
    return "training (fitted)" if seq_len == fit_length else f"training at length {seq_len}"


def fixes(context: PageContext) -> alt.TopLevelMixin:
    """Plain batch-8 training against the three fixes."""
    found = context.findings
    comparisons = [c for c in (found.checkpointing, found.half_precision, found.lora) if c is not None]
    if not comparisons:
        return alt.Chart(alt.Data(values=[])).mark_bar()
    plain = comparisons[0].reference
    bars = [{"row": plain.label, "MiB": plain.net.n_bytes / MIB if plain.net else 0,
             "label": plain.net.text if plain.net else ""}]
    bars += [{"row": c.subject.label, "MiB": c.subject.net.n_bytes / MIB if c.subject.net else 0,
              "label": f"{c.subject.net.text if c.subject.net else ''} ({c.change.text})"} for c in comparisons]
    order = [str(bar["row"]) for bar in bars]
    base = alt.Chart(alt.Data(values=bars), title="Three fixes against plain batch-8 training")
    return alt.layer(
        base.mark_bar().encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=360)),
                               x=alt.X("MiB:Q", title="net peak, MiB")),
        base.mark_text(align="left", dx=4).encode(y=alt.Y("row:N", sort=order), x="MiB:Q", text="label:N"),
    ).properties(width=WIDTH - 240)


def versions_chart(context: VersionsContext) -> alt.TopLevelMixin:
    """Each row's change against the newest set-up, one colour per release, with zero marked."""
    points = [{"release": label, "row": row, "change %": change * 100} for label, row, change in context.changes]
    rows = list(dict.fromkeys(str(point["row"]) for point in points))
    dots = alt.Chart(alt.Data(values=points)).mark_point(size=70, filled=True).encode(
        y=alt.Y("row:N", sort=rows, title=None),
        x=alt.X("change %:Q", title="change of net peak against the newest, %"),
        color=alt.Color("release:N", title=None, legend=alt.Legend(orient="bottom", labelLimit=400)),
        shape=alt.Shape("release:N", title=None), tooltip=["release:N", "row:N", "change %:Q"])
    zero = alt.Chart(alt.Data(values=[{"x": 0}])).mark_rule(color="#888").encode(x="x:Q")
    return alt.layer(zero, dots, title="Net peak by release, against the newest").properties(width=WIDTH - 200)


def to_svg(chart: alt.TopLevelMixin) -> str:
    """A chart as SVG text, rendered offline."""
    return vl_convert.vegalite_to_svg(chart.to_json())


def render_svgs(context: PageContext) -> dict[str, str]:
    """Every chart as SVG text, keyed by its file name."""
    charts = {"memory-by-row.svg": memory_by_row(context), "peak-vs-tokens.svg": peak_vs_tokens(context),
              "fixes.svg": fixes(context)}
    return {name: to_svg(chart) for name, chart in charts.items()}
