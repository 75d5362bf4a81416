"""The pages' charts, drawn with Altair from the contexts and rendered offline to SVG by vl-convert.

Every chart carries its scheme's page background and grey text, so it reads on a light page, a dark page and a
code host's dark theme alike; they are drawn narrow with large type, so they stay legible scaled to a phone."""

import json
from collections.abc import Callable, Sequence
from typing import Any

import altair as alt
import vl_convert

from generator.matrix import DEFAULT_ALLOCATOR, Mode, parse_row
from generator.report.article import PageContext
from generator.report.low_bit import LowBitSection
from generator.report.published_page import KIND_LABELS
from generator.report.views import PART_LABELS, Part, RowView
from generator.units import MIB

COMPONENT_ORDER = list(PART_LABELS.values())  # the stacking order, in the legend's words
# Each colour as (light page, dark page): every mark and every text at least 4.5:1 against the page's background
# in its scheme (#fdfdfc and #15171a in templates/style.css). The SVG is drawn in the light colours and carries a
# prefers-color-scheme rule that swaps each for its dark twin (dark_scheme_style below).
PALETTE = (("#2f6199", "#8ab4e0"), ("#a34e00", "#f0a35a"), ("#b3262d", "#f28b8b"), ("#00706a", "#5cc8bc"),
           ("#2e6b1f", "#8fd06a"), ("#6f42a0", "#c3a6e6"), ("#7a5a00", "#e0c060"), ("#8a3a6a", "#e8a0cc"),
           ("#4a5a6a", "#b8c4d0"), ("#7b3f1d", "#e0a98a"))
INK, DARK_INK = "#5c5c5c", "#b0b0b0"
BAND, DARK_BAND = "#e4e4e1", "#33363b"  # a row's threshold behind its dots: opaque, a step off each page
# The pages' own backgrounds (templates/style.css --bg). Each SVG carries its scheme's as its background: where it
# is embedded as an image, a host page of the other scheme (a code host's dark theme on a light system) shows the
# chart on its own background, never grey ink on a dark page; inlined, it is the page's own colour.
PAGE, DARK_PAGE = "#fdfdfc", "#15171a"
GRID = "#8080804d"


# One colour per series on every chart (tests/test_site.py reads the legends of every built SVG): each family's
# series keep their places in the palette wherever they are drawn, whatever else a chart shows beside them.
SETUP_SERIES = (*KIND_LABELS.values(), "Inference")  # the set-ups, in the words of the published page's groups
STEP_SERIES = ("step 1", "step 2")


def family_scale(labels: Sequence[str], family: Sequence[str]) -> alt.Scale:
    """A colour scale on which each label drawn keeps its family's place in the palette (a label the family does
    not list takes the places after the family's, in the order drawn); the legend lists them as ``labels`` does."""
    domain = list(dict.fromkeys(labels))
    extra = [label for label in domain if label not in family]
    places = {**{label: i for i, label in enumerate(family)},
              **{label: len(family) + i for i, label in enumerate(extra)}}
    return alt.Scale(domain=domain, range=[PALETTE[places[label] % len(PALETTE)][0] for label in domain])


def styled(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """The shared look: transparent, grey ink, type large enough to survive scaling to a phone."""
    # padding: vl-convert measures labels with its own font, a browser draws them with the reader's
    return (chart.properties(padding={"left": 24, "right": 24, "top": 6, "bottom": 6})
            .configure(background=PAGE, font="system-ui, sans-serif")
            .configure_axis(labelColor=INK, titleColor=INK, gridColor=GRID, domainColor=INK, tickColor=INK,
                            labelFontSize=14, titleFontSize=14)
            .configure_legend(labelColor=INK, labelFontSize=14, titleColor=INK)
            .configure_title(color=INK, fontSize=15, anchor="start")
            .configure_view(stroke=None)
            .configure_range(category=[light for light, _ in PALETTE])
            .configure_mark(color=PALETTE[0][0])
            .configure_point(opacity=1))  # Vega-Lite draws points at 0.7: 3.2 to 3.7:1 where 4.5:1 is the floor


def machine_of(context: PageContext) -> str:
    """The article's machine as a chart names it: 'AMD EPYC'."""
    return context.environment.get("CPU", "").split(" (")[0] or "this machine"


def titled(text: str, context: PageContext, basis: str) -> alt.TitleParams:
    """A chart's title, with a subtitle naming its model, its machine and the basis of its figures, so that the
    chart says what it shows wherever it is embedded."""
    return alt.TitleParams(text, subtitle=[context.model_name, f"measured on {machine_of(context)}", basis],
                           subtitleColor=INK, subtitleFontSize=14)


def memory_by_row(context: PageContext) -> alt.Chart:
    """A stacked bar per row: what P × bytes predicts (weights, gradients, AdamW state) and the rest."""
    records = [_slice(row.id, name, n_bytes)
               for row in context.rows if row.ok for name, n_bytes in _split(row)]
    order = [row.id for row in context.rows if row.ok]
    title = titled("Where each row's peak goes", context, "net peak: the process less its imports")
    return alt.Chart(alt.Data(values=records), title=title).mark_bar().encode(
        y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=220)),
        x=alt.X("sum(MiB):Q", title="net peak, MiB", axis=alt.Axis(tickCount=3)),
        color=alt.Color("component:N", title=None, scale=_components(records),
                        legend=alt.Legend(orient="bottom", columns=1)),
        order=alt.Order("order:Q"), tooltip=["row:N", "component:N", alt.Tooltip("MiB:Q", format=",.0f")],
    ).properties(width=200)


def low_bit_chart(section: LowBitSection) -> alt.Chart:
    """A stacked bar per bitsandbytes row and per row it changes: the simulated weights (the 4-bit layers
    packed) and their quantization constants, gradients, optimizer state and activations, then what the process
    held beyond its tensors."""
    records, labels = [], {}
    for row in section.rows:
        for row_id, parts in ((row.row, row.split), (row.against, row.against_split)):
            key = f"{row.model} {row_id}"
            if key in labels or not parts:
                continue
            # the model, the row's shape, its options: three short lines, since a browser's font runs longer
            pieces = parse_row(row_id).with_allocator(DEFAULT_ALLOCATOR).id.split("-", 3)
            labels[key] = [row.model, "-".join(pieces[:3]), *pieces[3:]]
            records += [_slice(key, name, n_bytes)
                        for name, n_bytes in parts]
    models = ", ".join(dict.fromkeys(row.model for row in section.rows))
    title = alt.TitleParams("Where the bitsandbytes rows' peaks go", subtitleColor=INK, subtitleFontSize=14,
                            subtitle=[models, f"measured on {section.machine}", f"under {section.allocator}",
                                      "net peak: the simulated split,", "then what the allocator kept"])
    return alt.Chart(alt.Data(values=records), title=title).mark_bar().encode(
        y=alt.Y("row:N", sort=list(labels), title=None, scale=alt.Scale(paddingInner=0.4),
                axis=alt.Axis(labelExpr=f"{json.dumps(labels)}[datum.label]", labelLineHeight=15, labelLimit=0)),
        x=alt.X("sum(MiB):Q", title="net peak, MiB", axis=alt.Axis(tickCount=3)),
        color=alt.Color("component:N", title=None, scale=_components(records),
                        legend=alt.Legend(orient="bottom", columns=1)),
        order=alt.Order("order:Q"), tooltip=["row:N", "component:N", alt.Tooltip("MiB:Q", format=",.0f")],
    ).properties(width=170, height={"step": 48})


def _components(records: list[dict]) -> alt.Scale:
    """The components drawn, in the stacking order, each in its colour on every chart."""
    drawn = {record["component"] for record in records}
    return family_scale([label for label in COMPONENT_ORDER if label in drawn], COMPONENT_ORDER)


def _slice(row: str, part: Part, n_bytes: int) -> dict:
    """One bar segment: the part's label is made here, from its name."""
    return {"row": row, "component": PART_LABELS[part], "MiB": n_bytes / MIB, "order": list(Part).index(part)}


def _split(row: RowView) -> list[tuple[Part, int]]:
    """A row's slices, with "activations and the rest" split where the row was simulated: the activations its
    tensors needed, and what the allocator kept beyond them."""
    parts = []
    for part in row.components:
        if part.name == Part.REST and row.simulated_activations is not None:
            activations = min(row.simulated_activations.n_bytes, part.n_bytes)
            parts += [(Part.ACTIVATIONS, activations), (Part.KEPT, part.n_bytes - activations)]
        else:
            parts.append((part.name, part.n_bytes))
    return parts


LINE_STEPS = 24  # segments of the fitted line on the log axis


FITTED = KIND_LABELS["full"]  # the peak-vs-tokens series the dashed line is fitted on


def peak_vs_tokens(context: PageContext) -> alt.TopLevelMixin:
    """Net peak against tokens per step, with the least-squares line over the plain training rows it was fitted
    on: those rows are the one filled series, every other row a ring of its own series."""
    fit = context.findings.fit
    fitted_rows = set(fit.rows) if fit is not None else set()
    points: list[dict[str, Any]] = [{"tokens": row.tokens, "MiB": row.net.n_bytes / MIB, "row": row.id,
               "kind": _token_series(row, fitted_rows, context.rows[0].seq_len)}
              for row in context.rows if row.net and row.dtype == "float32"
              and not row.gradient_checkpointing and not row.lora_rank]
    # tokens on a log scale: a 32 × 512 inference row sits 4× past the largest training row, and a linear axis
    # squeezed every training row into its first quarter; the fitted line is drawn through many points, so
    # it curves as a straight line does on a log axis
    tokens = [point["tokens"] for point in points] or [1]
    ticks = [4**k for k in range(12) if min(tokens) <= 4**k <= max(tokens)]
    x = alt.X("tokens:Q", title=["tokens per step (batch × length)", "log scale"],
              scale=alt.Scale(type="log", base=2, nice=False), axis=alt.Axis(values=ticks, format=","))
    series = sorted({str(point["kind"]) for point in points}, key=lambda label: (label != FITTED, label))
    colours = family_scale(series, SETUP_SERIES)  # the stroke's and the fitted series' fill
    scatter = alt.Chart(alt.Data(values=points)).mark_point(strokeWidth=2.5).encode(
        x=x,
        y=alt.Y("MiB:Q", title="net peak, MiB"),
        color=alt.Color("kind:N", title=None, scale=colours,
                        legend=alt.Legend(orient="bottom", columns=1)),
        shape=alt.Shape("kind:N", title=None, scale=alt.Scale(domain=series)),  # one legend with the colours
        # every other series is drawn as large rings, so a point of the same tokens never hides them
        size=alt.condition(alt.datum.kind == FITTED, alt.value(70), alt.value(320)),
        fill=alt.condition(alt.datum.kind == FITTED, alt.Fill("kind:N", legend=None, scale=colours),
                           alt.value("transparent")),
        tooltip=["row:N", alt.Tooltip("MiB:Q", format=",.0f")],
    )
    layers = [scatter]
    fitted = [row.tokens for row in context.rows if row.id in fitted_rows]
    if fit is not None and fitted:
        low, high = min(fitted), max(fitted)  # the line over the rows it was fitted on, not beyond them
        xs = [low * (high / low) ** (step / LINE_STEPS) for step in range(LINE_STEPS + 1)]
        line = [{"tokens": x, "MiB": (fit.intercept.n_bytes + fit.per_token.n_bytes * x) / MIB} for x in xs]
        layers.insert(0, alt.Chart(alt.Data(values=line)).mark_line(strokeDash=[4, 3], color=INK).encode(
            x=x, y="MiB:Q"))
    title = titled("Peak against tokens per step", context,
                   "net peak; filled, dashed: the fit's rows")
    return alt.layer(*layers, title=title).properties(width=270, height=260)


def _token_series(row: RowView, fitted: set[str], fit_length: int) -> str:
    """A row's series: generation, inference, the fit's own rows, or another full fine-tune (mixed precision,
    another length, or left out of the fit), named for what sets it apart."""
    if row.mode == Mode.GENERATE:
        return KIND_LABELS["generate"]
    if row.mode == Mode.INFERENCE:
        return "Inference"
    if row.id in fitted:
        return FITTED
    apart = ("mixed precision" if parse_row(row.id).amp else
             f"length {row.seq_len:,}" if row.seq_len != fit_length else "not in the fit")
    return f"{FITTED.split()[0]}, {apart}"  # "Full, length 1,024": short enough for a phone's legend


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
    base = alt.Chart(alt.Data(values=bars), title=titled("Fixes against plain batch-8 training", context,
                                                         "net peak, each against fp32 training"))
    return alt.layer(
        base.mark_bar().encode(y=alt.Y("row:N", sort=order, title=None, axis=alt.Axis(labelLimit=220)),
                               x=alt.X("MiB:Q", title="net peak, MiB", axis=alt.Axis(tickCount=3),
                                       scale=alt.Scale(domain=[0, 2.2 * max(float(bar["MiB"]) for bar in bars)]))),
        base.mark_text(align="left", dx=4, color=INK, fontSize=14).encode(y=alt.Y("row:N", sort=order), x="MiB:Q",
                                                                          text="label:N"),
    ).properties(width=200)


def two_steps(context: PageContext) -> alt.TopLevelMixin:
    """A training row's net peak phase by phase: step 2 reaches what no phase of step 1 did."""
    row = context.budget.measured_row
    phases = [phase for phase in row.phases if phase.name != "load"] if row else []
    if not phases:
        return alt.Chart(alt.Data(values=[])).mark_bar()
    bars = [{"phase": phase.label, "MiB": phase.net.n_bytes / MIB, "label": phase.net.text,
             "step": "step 2" if phase.name == "step2" else "step 1"} for phase in phases]
    step1 = max(phase.net.n_bytes / MIB for phase in phases if phase.name != "step2")
    order = [phase.label for phase in phases]
    base = alt.Chart(alt.Data(values=bars), title=titled("Two training steps, phase by phase", context,
                                                         "net peak of each phase"))
    return alt.layer(
        base.mark_bar().encode(x=alt.X("MiB:Q", title="net peak of the phase, MiB", axis=alt.Axis(tickCount=3)),
                               y=alt.Y("phase:N", sort=order, title=None),
                               color=alt.Color("step:N", title=None, legend=alt.Legend(orient="bottom"),
                                               scale=family_scale(STEP_SERIES, STEP_SERIES))),
        alt.Chart(alt.Data(values=[{"x": step1}])).mark_rule(color=INK, strokeDash=[4, 3]).encode(x="x:Q"),
    ).properties(width=200)


def dark_scheme_style() -> str:
    """A style element that gives each light colour its dark twin where the reader's scheme is dark."""
    pairs = [*PALETTE, (INK, DARK_INK), (PAGE, DARK_PAGE), (BAND, DARK_BAND)]
    rules = " ".join(f'[fill="{light}"]{{fill:{dark}}} [stroke="{light}"]{{stroke:{dark}}}' for light, dark in pairs)
    return f"<style>@media (prefers-color-scheme: dark){{{rules}}}</style>"


def to_svg(chart: alt.TopLevelMixin) -> str:
    """A chart as SVG text, rendered offline, readable in both schemes."""
    svg = vl_convert.vegalite_to_svg(styled(chart).to_json())
    end = svg.index(">") + 1  # after the opening <svg ...> tag
    return svg[:end] + dark_scheme_style() + svg[end:]


# The article's charts, registered once: file name -> what draws it (None: this build has nothing to draw). A new
# chart is its function and one line here, and the template's line that places it; the site's tests read this.
ARTICLE_CHARTS: dict[str, Callable[[PageContext], alt.TopLevelMixin | None]] = {
    "memory-by-row.svg": memory_by_row, "peak-vs-tokens.svg": peak_vs_tokens, "fixes.svg": fixes,
    "two-steps.svg": two_steps,
    "low-bit.svg": lambda context: low_bit_chart(context.low_bit) if context.low_bit is not None else None,
}


def render_svgs(context: PageContext) -> dict[str, str]:
    """Every chart this build draws, as SVG text, keyed by its file name."""
    drawn = {name: draw(context) for name, draw in ARTICLE_CHARTS.items()}
    return {name: to_svg(chart) for name, chart in drawn.items() if chart is not None}
