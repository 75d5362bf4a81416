"""measurements -> context -> pages."""

import re
import shutil
import tomllib
from pathlib import Path

import tomli_w
from conftest import grow, run_cli

from generator.report.article import build_context
from generator.store.catalog import load_folder as load_environment
from generator.store.codec import load_file
from generator.units import format_mib

TEMPLATES = Path(__file__).resolve().parent.parent / "templates"


def build(measurements: Path, output: Path, *extra: str) -> None:
    result = run_cli("build", "--measurements", str(measurements), "--output", str(output), *extra)
    assert result.returncode == 0, result.stderr


def test_build_writes_every_page_and_the_charts(measured_root: Path, tmp_path: Path) -> None:
    """One environment, rows only: the versions and fit pages are there too, saying what they lack."""
    site = tmp_path / "site"
    build(measured_root, site)
    from generator.report.docs import DOCS

    docs = [f"{name}.{suffix}" for name in ("docs", *(name for name, _ in DOCS)) for suffix in ("html", "md")]
    assert sorted(p.name for p in site.iterdir()) == sorted([
        ".memory-budget-manifest", "fit.html", "fit.md", "fixes.svg", "index.html", "index.md", "memory-by-row.svg",
        "peak-vs-tokens.svg", "two-steps.svg", "versions.html", "versions.md", *docs])
    html = (site / "index.html").read_text()
    markdown = (site / "index.md").read_text()
    from generator.report.charts import ARTICLE_CHARTS

    drawn = [name for name in ARTICLE_CHARTS if name != "low-bit.svg"]  # a folder of rows has no bitsandbytes rows
    for chart in drawn:
        assert chart in markdown and f'src="{chart}"' in html
        assert (site / chart).read_text().lstrip().startswith("<svg")
    assert "<table>" in html


def test_pages_load_nothing_from_the_network(measured_root: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    build(measured_root, site)
    for page in ("index.md", "index.html"):
        text = (site / page).read_text()
        assert "http" not in text, page
        assert not re.search(r"""(src|href)=["']//""", text), page
    for chart in site.glob("*.svg"):
        # An SVG file must name its XML namespaces (http://www.w3.org/...): identifiers, not downloads.
        urls = set(re.findall(r"https?://[^\s\"'<>)]+", chart.read_text()))
        assert all(url.startswith("http://www.w3.org/") for url in urls), (chart.name, urls)


def test_rebuilding_changes_nothing(measured_root: Path, tmp_path: Path) -> None:
    build(measured_root, tmp_path / "one")
    build(measured_root, tmp_path / "two")
    for page in (tmp_path / "one").iterdir():
        assert page.read_bytes() == (tmp_path / "two" / page.name).read_bytes(), page.name


def test_editing_a_figure_in_a_toml_file_changes_the_page(measurements_copy: Path, tmp_path: Path) -> None:
    path = next(measurements_copy.glob("*/*/train-b8-s256.toml"))
    document = tomllib.loads(path.read_text())
    old_net = document["result"]["net_peak_bytes"]
    grow(document, add=777 * 2**20)
    new_net = document["result"]["net_peak_bytes"]
    path.write_text(tomli_w.dumps(document))
    build(measurements_copy, tmp_path / "site")
    markdown = (tmp_path / "site" / "index.md").read_text()
    row_line = next(line for line in markdown.splitlines() if line.startswith("| `train-b8-s256` |"))
    assert f"| **{format_mib(new_net)}** |" in row_line
    assert format_mib(old_net) not in row_line
    assert f"{format_mib(new_net)} against" in markdown  # the finding that compares it moved too


def test_context_figures_come_from_the_files(measured_folder: Path) -> None:
    results = load_environment(measured_folder)
    context = build_context(results)
    by_id = {r.row.id: r for r in results}
    train, infer = by_id["train-b8-s256"].summary, by_id["infer-b8-s256"].summary
    comparison = context.findings.train_vs_inference
    assert comparison is not None
    assert comparison.ratio.value == train.net_peak_bytes / infer.net_peak_bytes
    assert context.parameters == by_id["train-b8-s256"].model.parameters
    weights = context.parameters * 4
    assert context.findings.train_vs_weights is not None
    assert context.findings.train_vs_weights.value == train.net_peak_bytes / weights
    lora = context.findings.lora
    assert lora is not None and lora.saving.value == 1 - by_id["train-b8-s256-lora8"].summary.net_peak_bytes / (
        train.net_peak_bytes)
    assert context.findings.fit is not None and len(context.findings.fit.rows) == 4
    assert {line.task for line in context.example.lines} == {"run it", "train all of it", "train a LoRA adapter"}
    assert context.baseline is not None
    assert context.baseline.n_bytes == by_id["baseline"].summary.baseline_bytes


def test_a_failed_row_shows_its_status_not_a_figure(measurements_copy: Path, tmp_path: Path) -> None:
    path = next(measurements_copy.glob("*/*/train-b8-s256-ckpt.toml"))
    document = tomllib.loads(path.read_text())
    old_figure = format_mib(document["result"]["net_peak_bytes"])
    document["result"].update(status="oom", phase="step2", detail="RuntimeError: can't allocate memory")
    path.write_text(tomli_w.dumps(document))
    build(measurements_copy, tmp_path / "site")
    markdown = (tmp_path / "site" / "index.md").read_text()
    row_line = next(line for line in markdown.splitlines() if line.startswith("| `train-b8-s256-ckpt`"))
    assert "OOM in step 2" in row_line and old_figure not in row_line
    assert "Gradient checkpointing saves" not in markdown
    context = build_context(load_environment(path.parent))
    assert context.findings.checkpointing is None
    assert [row.id for row in context.failed_rows] == ["train-b8-s256-ckpt"]


def test_build_picks_the_newest_environment_or_the_one_named(measurements_copy: Path, tmp_path: Path) -> None:
    (folder,) = [p for p in measurements_copy.iterdir() if p.is_dir()]
    older = measurements_copy / "cpu-older-environment"
    older.mkdir()  # in the layout before model folders: rows directly in the environment's folder
    for path in folder.glob("*/*.toml"):
        if path.name.startswith("_"):
            continue
        document = tomllib.loads(path.read_text())
        document["environment"]["id"] = older.name
        document["measured_at"] = "2000-01-01T00:00:00Z"
        (older / path.name).write_text(tomli_w.dumps(document))
    build(measurements_copy, tmp_path / "newest")
    assert folder.name in (tmp_path / "newest" / "index.md").read_text()
    build(measurements_copy, tmp_path / "older", "--env", older.name)
    assert older.name in (tmp_path / "older" / "index.md").read_text()


TYPED_FIGURE = re.compile(r"(?<![#0-9a-zA-Z_.{^])[0-9][0-9,.]*\s?(MB|MiB|GB|GiB|KiB|%|×|-byte|bytes)(?![a-zA-Z])"
                          r"|(?<![#0-9a-zA-Z_.^])[0-9]{1,3},[0-9]{3}|rank [0-9]+|r=[0-9]+")


def test_templates_hold_no_typed_in_figures() -> None:
    """Any number with a unit, a share, a ratio, a thousands separator or a LoRA rank in a template's own text
    is a figure typed in: it must come from a context value instead (2^20 bytes, a definition, is allowed)."""
    for typed_in in ("36 %", "13.0×", "rank 8", "r=8", "20 MiB", "512-byte", "6,687", "4 × 512", "128 KiB"):
        assert TYPED_FIGURE.search(f"text {typed_in} text"), typed_in
    for allowed in ("MiB (2^20 bytes)", "{{ row.net.text }} MiB", "#fig-3", "`lora8`", "step2"):
        assert not TYPED_FIGURE.search(allowed), allowed
    for template in TEMPLATES.glob("*.j2"):
        found = [m.group(0) for m in TYPED_FIGURE.finditer(template.read_text())]
        assert not found, (template.name, found)


def test_loaded_row_round_trips(measured_folder: Path) -> None:
    result = load_file(measured_folder / "train-b8-s256-lora8.toml")
    assert result.row.lora_rank == 8 and result.summary.lora_targets == "q_proj v_proj"
    assert all(repeat.lora_targets == "q_proj v_proj" for repeat in result.repeats)


def test_gpu_figures_get_a_column_only_when_present(measurements_copy: Path, tmp_path: Path) -> None:
    build(measurements_copy, tmp_path / "cpu")
    assert "GPU reserved" not in (tmp_path / "cpu" / "index.md").read_text()
    path = next(measurements_copy.glob("*/*/train-b8-s256.toml"))
    document = tomllib.loads(path.read_text())
    document["result"]["cuda_max_reserved_bytes"] = 3 * 2**30
    path.write_text(tomli_w.dumps(document))
    build(measurements_copy, tmp_path / "gpu")
    row_line = next(line for line in (tmp_path / "gpu" / "index.md").read_text().splitlines()
                    if line.startswith("| `train-b8-s256` |"))
    assert "| 3,072 MiB |" in row_line


def test_a_second_environment_adds_the_versions_page(measurements_copy: Path, tmp_path: Path) -> None:
    (folder,) = [p for p in measurements_copy.iterdir() if p.is_dir()]
    older = measurements_copy / folder.name.replace("-transformers", "-transformers4.57.6-was")
    shutil.copytree(folder, older)
    for path in older.glob("*/[!_]*.toml"):
        document = tomllib.loads(path.read_text())
        document["environment"].update(id=older.name, transformers="4.57.6")
        if path.stem == "train-b8-s256":
            grow(document, 2)
        path.write_text(tomli_w.dumps(document))
    build(measurements_copy, tmp_path / "site")
    site = tmp_path / "site"
    article, versions = (site / "index.md").read_text(), (site / "versions.md").read_text()
    assert folder.name in article and "(versions.md)" in article  # the newest release is the article
    assert 'href="versions.html"' in (site / "index.html").read_text()
    assert "## transformers 4.57.6 → " in versions
    assert "simulated tensors is missing in every row here" in versions  # no side carries a prediction
    row_line = next(line for line in versions.splitlines() if line.startswith("| `train-b8-s256` |"))
    assert "| less |" in row_line and "−50.0 %" in row_line
    assert (site / "versions.svg").read_text().lstrip().startswith("<svg")
    # the page answers first: the newest other release's verdict comes before the page's explanation
    verdict = next(line for line in versions.splitlines() if line.startswith("**The verdict first: "))
    assert "transformers 4.57.6 → " in verdict and "1 less" in verdict and "train-b8-s256: −50.0 %" in verdict
    assert versions.index(verdict) < versions.index("This page answers")


def test_every_chart_carries_its_schemes_background(measured_root: Path, tmp_path: Path) -> None:
    """Embedded as an image, an SVG follows the system's scheme, not the host page's: on a code host's dark theme
    under a light system a transparent chart showed grey ink on a dark page. Each chart now draws its scheme's
    page background first, and its dark-scheme rule swaps that background with the ink."""
    build(measured_root, tmp_path / "site")
    for chart in sorted((tmp_path / "site").glob("*.svg")):
        text = chart.read_text()
        first_shape = text[text.index("<rect"):text.index(">", text.index("<rect"))]
        assert 'fill="#fdfdfc"' in first_shape, (chart.name, first_shape)
        assert '[fill="#fdfdfc"]{fill:#15171a}' in text and '[fill="#5c5c5c"]{fill:#b0b0b0}' in text, chart.name


def test_the_contents_list_links_every_section_of_the_article() -> None:
    """Every section heading after the contents line is linked from it, by its anchor, in page order."""
    import re

    from generator.report.site import build_pages

    article = build_pages(Path(__file__).resolve().parent.parent / "measurements")["index.md"]
    contents = next(line for line in article.splitlines() if line.startswith("**Contents:**"))
    linked = re.findall(r"\]\(#([^)]+)\)", contents)
    after = article.split(contents, 1)[1]
    sections = [re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
                for heading in re.findall(r"^## (.+)$", after, flags=re.MULTILINE)]
    assert linked == sections


def _contrast(one: str, other: str) -> float:
    """WCAG's contrast ratio of two #rrggbb colours."""
    def luminance(colour: str) -> float:
        channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels]
        return 0.2126 * r + 0.7152 * g + 0.0722 * b
    high, low = sorted((luminance(one), luminance(other)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_every_chart_mark_reads_at_three_to_one_in_both_schemes() -> None:
    """Every mark of every built chart (role graphics-symbol) has a fill or an outline of 3:1 or more against the
    page, in the light colours it is drawn in and in their dark twins (charts.dark_scheme_style)."""
    from generator.report.charts import BAND, DARK_BAND, DARK_INK, DARK_PAGE, INK, PAGE, PALETTE

    dark = {light: night for light, night in (*PALETTE, (INK, DARK_INK), (BAND, DARK_BAND))}
    checked = 0
    for svg in sorted((TEMPLATES.parent / "site").glob("*.svg")):
        for mark in re.findall(r"<[a-z]+ [^>]*role=\"graphics-symbol\"[^>]*>", svg.read_text()):
            colours = [c for c in re.findall(r'(?:fill|stroke)="(#[0-9a-fA-F]{6})"', mark)]
            if not colours:
                continue
            checked += 1
            assert max(_contrast(c, PAGE) for c in colours) >= 3, (svg.name, mark[:160])
            assert max(_contrast(dark.get(c, c), DARK_PAGE) for c in colours) >= 3, (svg.name, mark[:160])
    assert checked > 100


def test_the_versions_verdict_is_the_newest_other_release() -> None:
    """Of the releases the committed versions page compares, its first line answers for the newest."""
    from packaging.version import Version

    versions = (TEMPLATES.parent / "site" / "versions.md").read_text()
    releases = re.findall(r"^## transformers ([0-9.]+) → ", versions, re.MULTILINE)
    newest = max(releases, key=Version)
    assert len(releases) >= 2 and f"**The verdict first: transformers {newest} → " in versions.split("\n## ")[0]


def _legend_colours(svg: str) -> dict[str, set[str]]:
    """Each legend label of a built chart with the colours its symbol is drawn in."""
    found: dict[str, set[str]] = {}
    entries = re.findall(r'role-legend-symbol[^>]*>(<path[^>]*>)</g><g class="mark-text role-legend-label"[^>]*>'
                         r'<text[^>]*>([^<]*)</text>', svg)
    for symbol, label in entries:
        colours = {c for c in re.findall(r'(?:fill|stroke)="(#[0-9a-fA-F]{6})"', symbol)}
        if colours:  # a shape legend's symbols are drawn in no colour of their own
            found.setdefault(label, set()).update(colours)
    return found


def test_a_series_has_one_colour_on_every_chart() -> None:
    """A set-up, a memory component, an allocator or a step is drawn in one colour wherever it appears: the
    low-bit chart once drew gradients in the colour the row chart gave quantization constants' place, and the
    published chart's recipes took their colours from their alphabetical order."""
    seen: dict[str, dict[str, set[str]]] = {}
    for svg in sorted((TEMPLATES.parent / "site").glob("*.svg")):
        for label, colours in _legend_colours(svg.read_text()).items():
            seen.setdefault(label, {})[svg.name] = colours
    assert seen, "no legend found in the built charts"
    for label, charts in seen.items():
        assert len(set().union(*charts.values())) == 1, (label, charts)
    shared = [label for label, charts in seen.items() if len(charts) > 1]
    assert "Generation" in shared and "weights" in shared, shared


def test_a_family_keeps_its_colours_whatever_else_is_drawn() -> None:
    """family_scale gives a label its family's place, not its place among the labels one chart draws."""
    from generator.report.charts import SETUP_SERIES, family_scale

    alone = family_scale(["QLoRA"], SETUP_SERIES).to_dict()
    beside = family_scale(["LoRA", "QLoRA", "Inference"], SETUP_SERIES).to_dict()
    assert alone["range"][0] == beside["range"][1]
    assert len(set(beside["range"])) == 3
