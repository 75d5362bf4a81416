"""The built site in a real browser: Debian's Chromium, headless, driven by Playwright, served from localhost.

Screenshots at 1280 and 390 px, light and dark, are kept in artifacts/screenshots/ (MEMORY_BUDGET_ARTIFACTS
overrides) for a person to look at. Without Chromium the test is skipped, unless MEMORY_BUDGET_REQUIRE_BROWSER
is set, as .ci/run sets it."""

import contextlib
import functools
import http.server
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

REPO = Path(__file__).resolve().parent.parent
SITE = REPO / "site"
ARTIFACTS = Path(os.environ.get("MEMORY_BUDGET_ARTIFACTS", REPO / "artifacts")) / "screenshots"
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--no-first-run"]
PAGES = sorted(path.name for path in SITE.glob("*.html"))

if CHROMIUM is None and os.environ.get("MEMORY_BUDGET_REQUIRE_BROWSER"):
    raise RuntimeError("MEMORY_BUDGET_REQUIRE_BROWSER is set but no chromium is installed")
pytestmark = pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def fresh_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site built now from the committed measurements, not the committed site/ (the golden test holds that the
    two agree): a change that breaks a page fails here before anyone rebuilds site/."""
    from generator.report.site import build_site

    output = tmp_path_factory.mktemp("fresh") / "site"
    build_site(REPO / "measurements", output)
    return output


@contextlib.contextmanager
def _serving(folder: Path) -> Iterator[str]:
    """A folder served on localhost, for as long as the block runs."""
    handler = functools.partial(_Quiet, directory=str(folder))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


@pytest.fixture(scope="module")
def server(fresh_site: Path) -> Iterator[str]:
    with _serving(fresh_site) as url:
        yield url


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory):
    from playwright.sync_api import sync_playwright

    profile = tmp_path_factory.mktemp("chromium-profile")
    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(profile), executable_path=CHROMIUM, headless=True, args=FLAGS)
        yield context
        context.close()


def _open(browser, url: str, width: int, scheme: str = "light", unfold: bool = True):
    """A page at a width and scheme, its requests and errors recorded; ``unfold`` opens every folded section
    (render.py folded), as a reader who opens them sees it, so that what is checked is what can be read."""
    page = browser.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    page.emulate_media(color_scheme=scheme)
    seen = {"requests": [], "errors": []}
    page.on("request", lambda request: seen["requests"].append(request.url))
    page.on("console", lambda message: seen["errors"].append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: seen["errors"].append(str(error)))
    page.goto(url, wait_until="load")
    if unfold:
        page.evaluate("document.querySelectorAll('details').forEach(d => { d.open = true; })")
    return page, seen


@pytest.mark.parametrize("name", PAGES)
def test_charts_tables_links_and_network(browser, server: str, name: str) -> None:
    page, seen = _open(browser, f"{server}/{name}", 1280)
    images = page.eval_on_selector_all("img", "els => els.map(e => [e.src, e.naturalWidth, e.clientHeight])")
    assert all(width > 0 and height > 0 for _, width, height in images), images
    assert page.locator("table").count() > 0 or name.startswith("docs")  # a docs page may be prose alone
    links = page.eval_on_selector_all("a[href]", "els => els.map(e => e.getAttribute('href'))")
    for href in links:
        target, _, anchor = href.partition("#")
        assert "//" not in target, href  # every link stays on the site
        other, _ = _open(browser, f"{server}/{target}", 1280) if target else (page, None)
        if anchor:
            assert other.evaluate("id => !!document.getElementById(id)", anchor), href
        if target:
            assert other.title(), href
            other.close()
    hosts = {urlparse(url).hostname for url in seen["requests"]}
    assert hosts <= {"127.0.0.1"}, hosts
    assert seen["errors"] == []
    page.close()


def _luminance(rgb: str) -> float:
    values = [int(part) / 255 for part in rgb[rgb.index("(") + 1:rgb.index(")")].split(",")[:3]]
    linear = [v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in values]
    return 0.2126 * linear[0] + 0.7152 * linear[1] + 0.0722 * linear[2]


def _contrast(first: str, second: str) -> float:
    light, dark = sorted((_luminance(first), _luminance(second)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


@pytest.mark.parametrize("name", PAGES)
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_phone_and_desktop_in_both_schemes(browser, server: str, name: str, scheme: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 390):
        page, _ = _open(browser, f"{server}/{name}", width, scheme)
        page.screenshot(path=str(ARTIFACTS / f"{Path(name).stem}-{width}-{scheme}.png"), full_page=True)
        assert page.evaluate("document.documentElement.scrollWidth") <= width  # no sideways scroll of the body
        unreachable = page.evaluate("""() => [...document.querySelectorAll('table')].filter(table => {
            table.scrollLeft = table.scrollWidth;
            const cells = table.querySelectorAll('tr > :last-child');
            const edge = table.getBoundingClientRect().right + 1;
            return [...cells].some(cell => cell.getBoundingClientRect().right > edge);
        }).length""")
        assert unreachable == 0, (width, unreachable)
        if width >= 1280:  # on a desktop every table fits its column
            cut = page.evaluate("[...document.querySelectorAll('table')].filter(t => t.scrollWidth > t.clientWidth + 1)"
                                ".map(t => t.querySelector('th').textContent)")
            assert cut == [], cut
        colours = page.evaluate("""() => [...document.querySelectorAll('p, li, td, th, h1, h2')].slice(0, 200)
            .map(e => getComputedStyle(e).color)""")
        background = page.evaluate("getComputedStyle(document.body).backgroundColor")
        worst = min(_contrast(colour, background) for colour in colours)
        assert worst >= 4.5, (scheme, width, worst)
        page.close()


def test_the_first_screen_answers_will_it_fit(browser, server: str) -> None:
    """At 1280 × 900, before any scrolling: a chart, the measured model's answer on the card, and the 7B's."""
    page, _ = _open(browser, f"{server}/index.html", 1280)
    fold = 900
    chart = page.evaluate("() => { const r = document.querySelector('img').getBoundingClientRect();"
                          " return [r.top, r.bottom]; }")
    assert chart[0] < fold and chart[1] - chart[0] > 100, chart  # a chart starts on the first screen
    answers = page.evaluate("""() => [...document.querySelectorAll('p')].filter(p => /(on a \\d+ GiB|the same) card/
        .test(p.textContent)).map(p => [p.textContent, p.getBoundingClientRect().bottom])""")
    assert len(answers) == 2 and all(bottom < fold for _, bottom in answers), answers
    measured, large = answers[0][0], answers[1][0]
    assert "the model this page measures" in measured and "full training, batch" in measured, measured
    assert "7b on the same card" in large.lower(), large
    for task, shape, fits in _large_model_verdicts():
        assert f"{task} at {shape}, {'fits' if fits else 'does not fit'} (" in large, (task, shape, fits, large)
    assert "with the same 10 % kept free" in large
    usable = f"{round(24 * 2**30 * 0.9) / 2**30:.1f} GiB usable"  # 21.6: what a 'does not fit' was judged against
    assert large.count(f"against {usable})") == sum(not fits for *_, fits in _large_model_verdicts()), large
    page.close()


@pytest.mark.parametrize("width, height", [(390, 844), (1280, 900)])
def test_the_fit_page_answers_on_its_first_screen(browser, server: str, width: int, height: int) -> None:
    """Before any scrolling, on a phone and a desktop: the likely card's answers with their basis, and the first
    model's line whole, whose full-training answer is the one its own table gives for that card."""
    page, _ = _open(browser, f"{server}/fit.html", width)
    page.set_viewport_size({"width": width, "height": height})
    lead = page.evaluate("""() => { const p = [...document.querySelectorAll('p')].find(p => /^On a \\d+ GiB card/
        .test(p.textContent)); const li = p.nextElementSibling.querySelector('li');
        return [p.textContent, li.textContent, li.getBoundingClientRect().bottom]; }""")
    intro, first, bottom = lead
    assert bottom <= height, (width, bottom)
    assert "simulated GPU reserve plus" in intro and "kept free" in intro, intro
    card = intro.split(" card")[0].removeprefix("On a ")
    model = first.split(":")[0]
    cell = page.evaluate("""([model, card]) => {
        const table = [...document.querySelectorAll('h2')].find(h => h.textContent.startsWith(model + ' ('))
            .nextElementSibling;
        let found = null;
        for (let t = table; t && t.tagName !== 'H2'; t = t.nextElementSibling) {
            if (t.tagName !== 'TABLE') continue;
            const heads = [...t.querySelectorAll('th')].map(th => th.textContent.trim());
            const column = heads.indexOf(card + ' GPU');
            if (column < 0) continue;
            const row = [...t.querySelectorAll('tbody tr')]
                .find(r => r.cells[0].textContent.trim() === 'full training');
            found = row ? row.cells[column].textContent.trim() : null;
        }
        return found; }""", [model, card])
    assert cell is not None and f"full training {cell}" in first, (cell, first)
    page.close()


def _large_model_verdicts() -> list[tuple[str, str, bool]]:
    """By hand from the committed _fit.toml: each task's first example row against a 24 GiB card, 10 % kept
    free, its simulated CUDA reserve plus the context allowance (287,047,680 bytes lazily
    loaded, plus two 32 MiB cuBLAS workspaces)."""
    import tomllib

    (path,) = sorted((REPO / "measurements").glob("*/_fit.toml"))[-1:]
    verdicts, seen = [], set()
    for line in tomllib.loads(path.read_text())["example"]:
        if line["task"] in seen:
            continue
        seen.add(line["task"])
        parts = line["row"].split("-")
        batch, length = int(parts[1][1:]), int(parts[2][1:])
        new = next((f" + {part[1:]} new tokens (KV cache)" for part in parts[3:] if part.startswith("n")), "")
        need = line["cuda_reserved_bytes"] + 287_047_680 + 2 * 32 * 2**20
        precision = "bf16" if "bf16" in parts else "fp32 with bf16 autocast" if "amp" in parts else "fp32"
        verdicts.append((f"{line['task']} ({precision})", f"batch {batch} × {length:,}{new}",
                         need <= round(24 * 2**30 * 0.9)))
    assert {fits for *_, fits in verdicts} == {True, False}, verdicts  # both outcomes are on the page
    return verdicts


_CHARTS_INLINE = """async () => {
    const found = [];
    for (const img of document.querySelectorAll('img[src$=".svg"]')) {
        const text = await (await fetch(img.src)).text();
        const holder = document.createElement('div');
        holder.innerHTML = text;
        document.body.appendChild(holder);
        const svg = holder.querySelector('svg');
        const scale = img.getBoundingClientRect().width / svg.viewBox.baseVal.width;
        const sizes = [...svg.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize) * scale);
        const alpha = (el, which) => { let a = parseFloat(getComputedStyle(el)[which + 'Opacity'] || '1');
            for (let e = el; e && e !== svg; e = e.parentElement) a *= parseFloat(getComputedStyle(e).opacity);
            return a; };  // every mark is judged, composited over the page with its own and its groups' opacity
        const inks = [...svg.querySelectorAll('text')].map(t => [getComputedStyle(t).fill, alpha(t, 'fill')]);
        const marks = [...svg.querySelectorAll('.role-mark path, .role-mark line, .role-mark text')]
            .flatMap(e => [[getComputedStyle(e).fill, alpha(e, 'fill')],
                           [getComputedStyle(e).stroke, alpha(e, 'stroke')]])
            .filter(([c, a]) => c && c !== 'none' && !c.startsWith('rgba(0, 0, 0, 0)') && a > 0);
        const boxes = [...svg.querySelectorAll('text')].filter(t => t.textContent.trim())
            .map(t => [t.textContent.trim(), t.getBoundingClientRect()]);
        const overlaps = [];
        boxes.forEach(([a, p], i) => boxes.slice(i + 1).forEach(([b, q]) => {
            const x = Math.min(p.right, q.right) - Math.max(p.left, q.left);
            const y = Math.min(p.bottom, q.bottom) - Math.max(p.top, q.top);
            if (x > 1 && y > 1) overlaps.push([a, b]); }));
        const frame = svg.getBoundingClientRect();  // the view box, as drawn: a text past it is cut off
        const clipped = boxes.filter(([, r]) => r.left < frame.left - 0.5 || r.right > frame.right + 0.5
                                      || r.top < frame.top - 0.5 || r.bottom > frame.bottom + 0.5)
            .map(([t, r]) => [t, Math.round(r.left - frame.left), Math.round(frame.right - r.right),
                              Math.round(r.top - frame.top), Math.round(frame.bottom - r.bottom)]);
        found.push([img.getAttribute('src'), Math.min(...sizes), inks, marks, overlaps.slice(0, 4), clipped]);
        holder.remove();
    }
    return found;
}"""


@pytest.mark.parametrize("name", PAGES)
@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_chart_text_is_12px_on_a_phone_and_every_ink_reads(browser, server: str, name: str, scheme: str) -> None:
    """At 390 px every chart's smallest text renders at 12 px or more, and every text and data mark of every
    chart has 4.5:1 contrast against the page in the reader's scheme (the SVG's own dark-scheme rule applied)."""
    from generator.report.charts import BAND, DARK_BAND

    page, _ = _open(browser, f"{server}/{name}", 390, scheme)
    background = page.evaluate("getComputedStyle(document.body).backgroundColor")
    band = _rgb(DARK_BAND if scheme == "dark" else BAND)
    for source, smallest, inks, marks, overlaps, _ in page.evaluate(_CHARTS_INLINE):
        assert smallest >= 12, (source, smallest)
        assert overlaps == [], (source, overlaps)  # no text box of a chart runs into another
        seen = [(_over(colour, opacity, background), colour) for colour, opacity in inks + marks]
        drawn = [(colour, raw) for colour, raw in seen if colour != band]  # the threshold band is a backdrop:
        grounds = [background, band] if len(drawn) < len(seen) else [background]  # what is drawn must read on it
        worst = min((_contrast(colour, ground), raw, ground) for colour, raw in drawn for ground in grounds)
        assert worst[0] >= 4.5, (source, scheme, worst)
    page.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_no_chart_text_runs_past_its_view_box(browser, server: str, width: int) -> None:
    """Every text of every chart, drawn in the browser's own font, lies inside its SVG's view box: the versions
    and history charts once cut their labels at the edge (vl-convert measures text with another font)."""
    checked = 0
    for name in PAGES:
        page, _ = _open(browser, f"{server}/{name}", width)
        for source, *_, clipped in page.evaluate(_CHARTS_INLINE):
            checked += 1
            assert clipped == [], (name, source, clipped[:4])  # text, then its room left, right, top, bottom
        page.close()
    assert checked >= 8


def test_the_versions_page_answers_first_and_stays_short_on_a_phone(browser, server: str) -> None:
    """At 390 px, folded as it loads, the versions page is at most 8,000 px tall (it was 48,000, with 28 to 31
    rows of dashes in its tables) and its verdict is its first paragraph, on the first screen; each comparison
    and the history open from their headings."""
    page, _ = _open(browser, f"{server}/versions.html", 390, unfold=False)
    assert page.evaluate("document.documentElement.scrollHeight") <= 8000
    paragraphs = page.locator("p")
    assert paragraphs.nth(1).inner_text().startswith("The verdict first:")  # next to the pages' links
    assert paragraphs.nth(1).bounding_box()["y"] < 800
    assert page.locator("details").count() >= 2 and page.locator("details[open]").count() == 0
    page.close()


def _rgb(hex_colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(hex_colour[i:i + 2], 16) for i in (1, 3, 5)))


def _over(colour: str, opacity: float, ground: str) -> str:
    """A colour drawn at an opacity over a ground, as the eye gets it."""
    top, base = (_channels(colour), _channels(ground))
    alpha = opacity * (top[3] if len(top) > 3 else 1.0)
    mixed = (round(alpha * t + (1 - alpha) * b) for t, b in zip(top[:3], base[:3], strict=True))
    return "rgb({}, {}, {})".format(*mixed)


def _channels(colour: str) -> list[float]:
    return [float(part) for part in colour[colour.index("(") + 1:colour.index(")")].split(",")]


@pytest.mark.parametrize("name", PAGES)
def test_every_table_answer_is_in_view_on_a_phone(browser, server: str, name: str) -> None:
    """At 390 px no table scrolls sideways: every cell, the last (answer) column included, lies inside the
    window, and carries its column's label."""
    page, _ = _open(browser, f"{server}/{name}", 390)
    outside = page.evaluate("""() => [...document.querySelectorAll('td')].filter(cell => {
        const box = cell.getBoundingClientRect();
        return box.right > window.innerWidth + 1 || box.left < -1 || cell.closest('table').scrollWidth >
            cell.closest('table').clientWidth + 1; }).map(cell => cell.textContent).slice(0, 5)""")
    assert outside == [], outside
    unlabelled = page.evaluate("[...document.querySelectorAll('td:not([data-label])')].length")
    assert unlabelled == 0
    page.close()


def _python_answer(calculator: dict, model: str, kind: str, seq: int, budget: int, target: str) -> str:
    """The page's own Python rules (generator/report/fit_page.py) for one choice, from the calculator's data."""
    from generator.budget import ProcessModel
    from generator.report.fit_page import Budget, cell, site_answers
    from generator.store.fit_table import Curve, FitTable

    (curve,) = [c for c in calculator["curves"] if (c["model"], c["kind"], c["seq"]) == (model, kind, seq)]
    table = FitTable(libraries="", environment="", seq_len=curve["seq"], curves=(Curve(
        model=model, config_sha256="", parameters=0, setup=kind, row=curve["row"],
        batches=tuple(int(v) for v in curve["batches"]), tensor_bytes=tuple(int(v) for v in curve["tensor"]),
        cuda_bytes=tuple(int(v) for v in curve["cuda"])),), example=(), seconds=0.0, simulator="")
    process = ProcessModel(calculator["proportional"], calculator["fixed"], 1, "")
    ((_, answer),) = site_answers(table, process, (Budget("", budget, target, calculator["margins"][target]),),
                                  int(curve["allowance"]))  # QLoRA's allowance on its reserve, none on the others
    return cell(answer)


def _check_grid(page, calculator: dict, model: str, seq: int, kinds: list[str]) -> int:
    """Each set-up, on a GPU and this CPU, at three cards and a typed budget: the page's answer is Python's."""
    checked = 0
    for kind in kinds:
        page.select_option("#calc-kind", kind)
        for target in ("gpu", "cpu"):
            page.select_option("#calc-target", target)
            for card in ("8", "24", "80", "typed"):
                page.select_option("#calc-card", card)
                if card == "typed":
                    page.fill("#calc-typed", "13.75")
                answer = page.locator("#calc-answer")
                budget = int(answer.get_attribute("data-budget"))
                assert budget == (round(13.75 * 2**30) if card == "typed" else int(card) * 2**30)
                expected = _python_answer(calculator, model, kind, seq, budget, target)
                assert answer.get_attribute("data-text") == expected, (model, seq, kind, target, card)
                checked += 1
    return checked


def test_the_calculator_answers_as_the_tables_and_python_do(browser, server: str) -> None:
    """Over a grid of models, set-ups, cards, typed budgets and targets, the calculator's answer is the one the
    page's Python rules give for the same choice; for a card the tables list it is also that table's cell. It
    asks nothing of the network, and works at 390 px."""
    import json

    page, seen = _open(browser, f"{server}/fit.html", 390)
    assert page.locator("#calculator").is_visible()
    calculator = json.loads(page.text_content("#calculator-data"))
    models = list(dict.fromkeys(curve["model"] for curve in calculator["curves"]))
    checked = 0
    for model in models:  # the first model at every length it offers, the others at the tables' length
        page.select_option("#calc-model", model)
        offered = page.eval_on_selector_all("#calc-seq option", "options => options.map(o => o.value)")
        for seq in offered if model == models[0] else [page.input_value("#calc-seq")]:
            page.select_option("#calc-seq", seq)
            kinds = [c["kind"] for c in calculator["curves"] if c["model"] == model and str(c["seq"]) == seq]
            checked += _check_grid(page, calculator, model, int(seq), kinds if model == models[0] else kinds[::3])
    assert checked >= 100
    page.select_option("#calc-model", models[0])
    page.select_option("#calc-seq", str(calculator["seq_len"]))
    page.select_option("#calc-kind", calculator["curves"][0]["kind"])
    page.select_option("#calc-target", "gpu")
    page.select_option("#calc-card", "24")
    table_cell = page.locator("table").first.locator("tr", has_text=calculator["curves"][0]["kind"]).first
    assert page.locator("#calc-answer").get_attribute("data-text") in table_cell.inner_text()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert {urlparse(url).hostname for url in seen["requests"]} <= {"127.0.0.1"} and seen["errors"] == []
    page.close()


def test_typing_a_budget_changes_the_answer_whatever_card_was_picked(browser, server: str) -> None:
    """The GiB box is always there and always read: typing into it after picking a card answers the typed budget
    (the card list turns to "another size…"), and picking a card again puts that card's size in the box."""
    page, _ = _open(browser, f"{server}/fit.html", 390)
    page.select_option("#calc-card", "24")
    before = page.locator("#calc-answer").get_attribute("data-text")
    assert page.locator("#calc-typed").is_visible() and page.input_value("#calc-typed") == "24"
    page.fill("#calc-typed", "7.5")
    assert page.input_value("#calc-card") == "typed"
    assert int(page.locator("#calc-answer").get_attribute("data-budget")) == round(7.5 * 2**30)
    assert page.locator("#calc-answer").get_attribute("data-text") != before
    page.select_option("#calc-card", "80")
    assert page.input_value("#calc-typed") == "80"
    assert int(page.locator("#calc-answer").get_attribute("data-budget")) == 80 * 2**30
    page.select_option("#calc-kind", "full training")
    page.fill("#calc-typed", "4000")  # past every simulated batch of a curve that stops short of the batch limit
    answer = page.locator("#calc-answer")
    assert "beyond the simulated curve" in answer.get_attribute("data-text")
    assert answer.get_attribute("data-batch") == "0"
    page.close()


CALCULATOR_MODEL = REPO / "tests" / "calculator-llama.json"  # 2 layers of hidden 2048: answers between doublings
CALCULATOR_CARDS = (8, 24, 80)


@pytest.fixture(scope="module")
def recorded_site(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[int, list[dict]]]:
    """A copy of the committed measurements with a model's curves added as a user adds them (`fit --model X
    --record --seq 256`), the site built from it, and `fit --format json --target gpu`'s answers for that model
    at some of the cards the calculator lists: two separate commands, each run as a user runs it."""
    import json

    from conftest import run_cli

    from generator.report.site import build_site

    root = tmp_path_factory.mktemp("recorded")
    shutil.copytree(REPO / "measurements", root / "measurements")
    common = ["--model", str(CALCULATOR_MODEL), "--seq", "256", "--measurements", str(root / "measurements")]
    env = {**os.environ, "MEMORY_BUDGET_CACHE": str(root / "cache")}  # fit reads what the recording simulated
    result = run_cli("fit", "--record", *common, env=env, timeout=1800)
    assert result.returncode == 0, result.stderr
    answers = {}
    for gib in CALCULATOR_CARDS:
        result = run_cli("fit", "--budget", f"{gib}GiB", "--target", "gpu", "--format", "json", *common, env=env,
                         timeout=1800)
        assert result.returncode == 0, result.stderr
        answers[gib] = json.loads(result.stdout)
    build_site(root / "measurements", root / "site")
    return root / "site", answers


def test_the_calculator_answers_a_recorded_model_as_fit_format_json_does(browser, recorded_site) -> None:
    """For a model recorded with `fit --model X --record`, the calculator's answer at each card and set-up is
    `fit --format json --target gpu`'s own: the same batch, bytes and usable budget, to the byte, and the same
    words as the page's tables write them; offline, at 390 px."""
    from generator.answers.fit import FitAnswer
    from generator.report.fit_page import cell

    site, answers = recorded_site
    with _serving(site) as url:
        page, seen = _open(browser, f"{url}/fit.html", 390)
        page.select_option("#calc-model", CALCULATOR_MODEL.stem)
        page.select_option("#calc-seq", "256")
        page.select_option("#calc-target", "gpu")
        checked = []
        offered = page.eval_on_selector_all("#calc-kind option", "options => options.map(o => o.value)")
        for gib, found in answers.items():
            assert sorted(fitted["kind"] for fitted in found) == sorted(offered)
            page.select_option("#calc-card", str(gib))
            for fitted in found:
                page.select_option("#calc-kind", fitted["kind"])
                shown = page.locator("#calc-answer")
                assert [int(shown.get_attribute(f"data-{name}")) for name in ("batch", "bytes", "usable")] == [
                    fitted["batch"], fitted["predicted_bytes"], fitted["usable_bytes"]], (gib, fitted["kind"])
                fields = {name: fitted[name] for name in FitAnswer.__dataclass_fields__}
                assert shown.get_attribute("data-text") == cell(FitAnswer(**fields))
                checked.append((gib, fitted["batch"]))
        assert page.evaluate("document.documentElement.scrollWidth") <= 390
        assert {urlparse(u).hostname for u in seen["requests"]} <= {"127.0.0.1"} and seen["errors"] == []
        page.close()
    assert len(checked) >= 3 * 8 and any(batch & (batch - 1) for _, batch in checked)  # not only doublings
