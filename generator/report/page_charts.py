"""The versions page's and the fit page's charts: each row's change by release, the release history, and
predicted against measured. They share the article charts' look (charts.py), which renders them."""

import json

import altair as alt

from generator.matrix import ALLOCATORS, DEFAULT_ALLOCATOR, parse_row
from generator.report.charts import BAND, INK, SETUP_SERIES, family_scale
from generator.report.fit_page import AccuracyPoint
from generator.report.history import HistoryContext
from generator.report.published_page import ChartPoint as PublishedPoint
from generator.report.versions import VersionsContext


def two_lines(row_id: str) -> list[str]:
    """A row's id as an axis label: the row, and its allocator on a second line where it names one."""
    row = parse_row(row_id)
    if row.allocator == DEFAULT_ALLOCATOR:
        return [row_id]
    return [row.with_allocator(DEFAULT_ALLOCATOR).id, row.allocator]


def versions_chart(context: VersionsContext) -> alt.TopLevelMixin:
    """Each row's change against the newest set-up, one colour per release, with zero marked and each row's
    threshold drawn as a grey band: a dot inside it reads `same`."""
    points = [{"release": label, "row": row, "change %": change * 100, "low": -threshold * 100,
               "high": threshold * 100} for label, row, change, threshold in context.changes]
    rows = list(dict.fromkeys(str(point["row"]) for point in points))
    # a row's allocator on a second line: with the longest row, the chart's 14 px type still scales to 12 px or
    # more on a phone, and no label is cut
    lines = {row: two_lines(row) for row in rows}
    y = alt.Y("row:N", sort=rows, title=None, scale=alt.Scale(paddingInner=0.5),
              axis=alt.Axis(labelExpr=f"{json.dumps(lines)}[datum.label]", labelLineHeight=15, labelLimit=0))
    # the band's fill is a step off the page, its outline the ink: a mark of 3:1 or more in both schemes
    band = alt.Chart(alt.Data(values=points)).mark_bar(color=BAND, stroke=INK, strokeWidth=1, height=10).encode(
        y=y, x="low:Q", x2="high:Q")
    dots = alt.Chart(alt.Data(values=points)).mark_point(size=70, filled=True, opacity=1).encode(
        y=y,
        x=alt.X("change %:Q", title=["change of net peak", "against the newest, %", "(grey: the row's threshold)"]),
        color=alt.Color("release:N", title=None, legend=alt.Legend(orient="bottom", columns=1, labelLimit=230)),
        shape=alt.Shape("release:N", title=None), tooltip=["release:N", "row:N", "change %:Q"])
    zero = alt.Chart(alt.Data(values=[{"x": 0}])).mark_rule(color=INK).encode(x="x:Q")
    machines = ("each release on the machine its table names" if context.across_machines
                else "every release on the article's machine")
    title = alt.TitleParams("Net peak by release, against the newest", subtitleColor=INK, subtitleFontSize=14,
                            subtitle=[context.model_name, machines, "basis: measured net peaks"])
    return alt.layer(band, zero, dots, title=title).properties(width=150, height={"step": 34})


def history_chart(history: HistoryContext) -> alt.TopLevelMixin:
    """Each row's simulated tensor peak by release, oldest first, as asv draws a benchmark's history."""
    points = [{"row": row, "release": release, "MiB": mib} for row, release, mib in history.points]
    stepped = {(step.row, step.after) for step in history.steps}
    marks = [point for point in points if (point["row"], point["release"]) in stepped]
    shown = list(history.releases)[::-1][::2]  # every other release from the newest: labels that do not touch
    x = alt.X("release:O", sort=list(history.releases), title="transformers release", scale=alt.Scale(padding=1),
              axis=alt.Axis(labelAngle=-90, values=shown, titlePadding=14))  # a browser's font runs longer
    legend = alt.Legend(orient="bottom", columns=1)
    lines = alt.Chart(alt.Data(values=points)).mark_line(point=True).encode(
        x=x, y=alt.Y("MiB:Q", title="simulated tensor peak, MiB", axis=alt.Axis(titlePadding=14)),
        color=alt.Color("row:N", title=None, legend=legend),
        # every other row dashed: two rows within a line's width of each other (train-b8-s256 and train-b4-s512
        # differ by under 1 %) both show, the dashed one over the solid
        strokeDash=alt.StrokeDash("row:N", title=None, legend=legend, scale=alt.Scale(range=[[1, 0], [6, 4]])),
        tooltip=["row:N", "release:O", alt.Tooltip("MiB:Q", format=",.1f")])
    layers = [lines]
    if marks:
        layers.append(alt.Chart(alt.Data(values=marks)).mark_point(shape="diamond", size=160, filled=False,
                                                                   strokeWidth=2).encode(x=x, y="MiB:Q"))
    title = alt.TitleParams("Tensor peak by transformers release", subtitleColor=INK, subtitleFontSize=14,
                            subtitle=[history.model, "simulated tensor peaks:", "no machine, only the releases",
                                      f"steps of {history.step_text} or more marked"])
    return alt.layer(*layers, title=title).properties(width=280, height=320)


def accuracy_chart(points: tuple[AccuracyPoint, ...], within: float, machine: str) -> alt.TopLevelMixin:
    """Predicted against measured net peak for every row judged out of sample (its model's rows left out of the
    fit), log-log: y = x, the ±within band, and each row's repeats as a horizontal bar."""
    shown = [p for p in points if p.measured > 0 and p.held_out]
    if not shown:
        return alt.Chart(alt.Data(values=[])).mark_point()
    data = [{"model": p.model, "row": p.row, "allocator": p.allocator, "measured": p.measured, "low": p.low,
             "high": p.high, "predicted": p.predicted, "judged": "held out"} for p in shown]
    low = min(min(p.low, p.predicted) for p in shown) * 0.8
    ends = [low, max(max(p.high, p.predicted) for p in shown) * 1.2]
    factors = (("y = x", 1.0), ("above", 1 + within), ("below", 1 - within))
    lines = [{"x": x, "y": x * factor, "line": name} for x in ends for name, factor in factors]
    scale = alt.Scale(type="log", domain=ends)
    colours = family_scale([name for name in ALLOCATORS if name in {p.allocator for p in shown}], ALLOCATORS)
    ticks = [v for v in (100, 300, 1_000, 3_000, 10_000, 30_000, 100_000) if ends[0] <= v <= ends[1]]
    x = alt.X("measured:Q", title="measured net peak, MiB", scale=scale, axis=alt.Axis(values=ticks))
    y = alt.Y("predicted:Q", title="predicted, MiB", scale=scale, axis=alt.Axis(values=ticks))
    guide = alt.Chart(alt.Data(values=lines)).mark_line(color=INK, strokeWidth=1).encode(
        x=alt.X("x:Q", scale=scale), y=alt.Y("y:Q", scale=scale), detail="line:N",
        strokeDash=alt.condition(alt.datum.line == "y = x", alt.value([1, 0]), alt.value([4, 3])))
    spread = alt.Chart(alt.Data(values=data)).mark_rule(strokeWidth=2).encode(
        x=alt.X("low:Q", scale=scale), x2="high:Q", y=y, color=alt.Color("allocator:N", title=None, scale=colours))
    dots = alt.Chart(alt.Data(values=data)).mark_point(size=60, strokeWidth=2).encode(
        x=x, y=y, color=alt.Color("allocator:N", title=None, scale=colours,
                                  legend=alt.Legend(orient="top", direction="horizontal")),
        shape=alt.Shape("model:N", title=None, legend=alt.Legend(orient="bottom", columns=1)),
        tooltip=["model:N", "row:N", "allocator:N", "judged:N", alt.Tooltip("measured:Q", format=",.0f"),
                 alt.Tooltip("predicted:Q", format=",.0f")])
    title = alt.TitleParams("Predicted against measured", subtitleColor=INK, subtitleFontSize=14, subtitle=[
        f"net peaks measured on {machine}", "each prediction out of sample",
        f"solid: y = x; dashed: ±{within:.0%}".replace("%", " %")])
    return alt.layer(guide, spread, dots, title=title).properties(
        width=260, height=260)


def published_chart(points: tuple[PublishedPoint, ...]) -> alt.TopLevelMixin:
    """Simulated GPU tensor peak against the peak a source published, one point an entry, coloured by recipe:
    y = x and the default band (-5 % / +10 %) as lines."""
    data = [{"entry": p.id, "recipe": p.kind, "published": p.published_gib, "simulated": p.predicted_gib}
            for p in points]
    top = max(max(p.published_gib, p.predicted_gib) for p in points) * 1.1
    factors = (("y = x", 1.0), ("+10 %", 1.10), ("-5 %", 0.95))
    lines = [{"x": x, "y": x * factor, "line": name} for x in (0, top) for name, factor in factors]
    scale = alt.Scale(domain=[0, top])
    recipes = [label for label in SETUP_SERIES if label in {p.kind for p in points}]
    guide = alt.Chart(alt.Data(values=lines)).mark_line(color=INK, strokeWidth=1).encode(
        x=alt.X("x:Q", scale=scale), y=alt.Y("y:Q", scale=scale), detail="line:N",
        strokeDash=alt.condition(alt.datum.line == "y = x", alt.value([1, 0]), alt.value([4, 3])))
    dots = alt.Chart(alt.Data(values=data)).mark_point(size=70, strokeWidth=2, filled=True).encode(
        x=alt.X("published:Q", title="published peak, GiB", scale=scale),
        y=alt.Y("simulated:Q", title="simulated GPU tensor peak, GiB", scale=scale),
        color=alt.Color("recipe:N", title=None, legend=alt.Legend(orient="bottom", columns=2),
                        scale=family_scale(recipes, SETUP_SERIES)),
        shape=alt.Shape("recipe:N", title=None, scale=alt.Scale(domain=recipes)),  # one legend with the colours
        tooltip=["entry:N", "recipe:N", alt.Tooltip("published:Q", format=".2f"),
                 alt.Tooltip("simulated:Q", format=".2f")])
    title = alt.TitleParams("Simulated against published", subtitleColor=INK, subtitleFontSize=14, subtitle=[
        "published: max_memory_allocated()", "on the source's card", "simulated: the GPU program's tensor peak",
        "solid: y = x; dashed: -5 % and +10 %"])
    return alt.layer(guide, dots, title=title).properties(width=260, height=260)
