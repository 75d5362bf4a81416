"""Fast, exact tests of the modules that compute figures: the budget model, the row summary, diff's verdicts,
escaping and units. Each figure is checked against a value worked out by hand, so that a planted bug (a sign,
a bound, a constant, a comparison) fails a test; `nox -s mutation` measures how many do."""

from dataclasses import replace

import pytest

from generator.answers.fit import largest_batch
from generator.budget import (
    ProcessModel,
    fit_line,
    fixed_costs,
    per_token_cost,
    process_model,
    weight_bytes,
)
from generator.diff.compare import Side, diff_row, moved_most, parse_threshold, side, threshold_for
from generator.escaping import last_line, markdown_code, markdown_text, one_line, one_line_error, terminal_text
from generator.matrix import parse_row
from generator.store.environment import Environment
from generator.store.records import ModelInfo, Repeat, RowResult, Summary
from generator.store.summary import combine, summarize
from generator.units import (
    GIB,
    MIB,
    format_gib,
    format_mib,
    format_mib_above,
    format_size,
    mib_range,
    parse_size,
    signed_mib,
    signed_percent,
)

# ---------------------------------------------------------------- budget


def test_p_times_bytes_by_hand() -> None:
    assert weight_bytes(10, "float32") == 40 and weight_bytes(10, "bfloat16") == 20
    costs = fixed_costs(100, 10, "float32", training=True)
    assert (costs.weights, costs.gradients, costs.adamw_state, costs.total) == (400, 40, 80, 520)
    assert fixed_costs(100, 10, "float16", training=False).total == 200


def test_a_line_through_exact_points() -> None:
    line = fit_line([1, 2, 3], [5, 7, 9])
    assert line is not None
    assert (line.slope, line.intercept, line.r_squared, line.points) == (2, 3, 1, 3)
    assert line.at(10) == 23
    assert fit_line([1, 1, 1], [1, 2, 3]) is None and fit_line([1, 2], [4, 4]) is None
    assert fit_line([1, 2], [4, 5]) is not None
    assert per_token_cost([1, 2], [3, 5]) is None and per_token_cost([1, 2, 4], [3, 5, 9]) is not None


def test_the_process_model_by_hand() -> None:
    model = ProcessModel(proportional=0.5, fixed=10.0, rows=3, source="three rows")
    assert model.expected(100) == 160 and model.expected(0) == 10
    assert model.describe() == "net peak = tensor peak × 1.500 +0 MiB, fitted on three rows"
    fitted = process_model([(100, 160), (200, 310), (300, 460)], "s")
    assert (fitted.proportional, fitted.fixed, fitted.rows, fitted.source) == (pytest.approx(0.5),
                                                                               pytest.approx(10.0), 3, "s")
    two = process_model([(100, 160), (200, 310)], "s")
    assert (two.proportional, two.fixed, two.rows) == (0.0, 0.0, 2) and two.source.startswith("no overhead")
    assert two.describe().startswith("net peak = tensor peak: no measured rows")
    assert ProcessModel(0.1, 0.0, 0, "x").describe().startswith("net peak = tensor peak: no measured rows")


@pytest.mark.parametrize(("usable", "answer"), [(9, 0), (10, 1), (11, 1), (20, 2), (29, 2), (30, 3), (100, 10),
                                                (1000, 10)])
def test_the_largest_batch_by_hand(usable: int, answer: int) -> None:
    assert largest_batch(lambda batch: 10 * batch, usable, 10) == answer


# ---------------------------------------------------------------- summary


def _repeat(net: int, status: str = "ok", **figures: object) -> Repeat:
    return Repeat(status=status, baseline_bytes=100, peak_rss_bytes=100 + net, **figures)  # type: ignore[arg-type]


def test_combine_by_hand() -> None:
    assert combine("median", [1, 5, 3]) == 3 and combine("median", [1, 4]) == 2  # an int figure stays whole
    assert combine("median", [1.0, 4.0]) == 2.5 and combine("max", [1, 5, 3]) == 5
    assert combine("first", ["a", "b"]) == "a"
    assert combine("median", [{"x": 1, "y": 9}, {"x": 3}]) == {"x": 2}  # phases every repeat recorded


def test_summarize_by_hand() -> None:
    ok = summarize([_repeat(400, wall_seconds=1.0, step_seconds=(1.0, 2.0)),
                    _repeat(800, wall_seconds=3.0, step_seconds=(3.0, 4.0)),
                    _repeat(600, wall_seconds=2.0, step_seconds=(2.0, 2.0))], "RLIMIT_DATA", "note")
    assert (ok.status, ok.net_peak_bytes, ok.net_peak_min_bytes, ok.net_peak_max_bytes) == ("ok", 600, 400, 800)
    assert (ok.peak_rss_bytes, ok.baseline_bytes, ok.wall_seconds, ok.steps_seconds) == (700, 100, 2.0, 4.0)
    assert (ok.memory_limit_method, ok.repeats_note, ok.ok) == ("RLIMIT_DATA", "note", True)
    failed = summarize([_repeat(400), _repeat(0, status="oom", phase="step2", detail="d", step_seconds=(1.5,))])
    assert (failed.status, failed.phase, failed.detail, failed.steps_seconds) == ("oom", "step2", "d", 1.5)
    assert failed.net_peak_bytes == 0 and not failed.ok and failed.peak_rss_bytes == 100


def test_a_summary_knows_its_set_up_and_step_peaks() -> None:
    summary = Summary(status="ok", startup_seconds=1.0, load_seconds=2.0, wall_seconds=12.0,
                      phase_peak_bytes={"load": 5, "forward": 7, "backward": 9, "optimizer": 8, "step2": 11})
    assert summary.setup_seconds == 3.0 and summary.setup_share == 0.25 and summary.step_peaks() == (9, 11)
    assert Summary(status="ok").setup_share is None and Summary(status="ok").step_peaks() == (0, 0)
    assert _repeat(50).net_peak_bytes == 50 and Repeat(status="ok", baseline_bytes=9).net_peak_bytes == 0


# ---------------------------------------------------------------- diff


def _result(net: int, low: int, high: int, repeats: int = 3, status: str = "ok", row: str = "train-b8-s256",
            sha: str = "abc", phases: dict[str, int] | None = None) -> RowResult:
    summary = Summary(status=status, net_peak_bytes=net, net_peak_min_bytes=low, net_peak_max_bytes=high,
                      baseline_bytes=100, peak_rss_bytes=100 + net,
                      phase_peak_bytes=phases if phases is not None else {"forward": 100 + net})
    return RowResult(row=parse_row(row), model=ModelInfo("m", "random-init", "m", sha, 1, 1),
                     environment=Environment(id="cpu-x"), summary=summary, measured_at="2026",
                     repeats=tuple(_repeat(net) for _ in range(repeats)))


def test_a_side_by_hand() -> None:
    result = _result(1000, 900, 1100, phases={"forward": 700, "step2": 1100})
    figures = side(result)
    assert (figures.net_bytes, figures.min_bytes, figures.max_bytes, figures.repeats) == (1000, 900, 1100, 3)
    assert figures.peak_phase == "step2" and figures.phase_net_bytes == {"forward": 600, "step2": 1000}
    assert figures.spread == 0.2
    assert replace(figures, repeats=1).spread == 0.0 and replace(figures, net_bytes=0).spread == 0.0


def test_thresholds_by_hand() -> None:
    wide = Side(1000 * MIB, 900 * MIB, 1100 * MIB, 3, "", {}, "ok")
    narrow = Side(1000 * MIB, 995 * MIB, 1005 * MIB, 3, "", {}, "ok")
    assert threshold_for(narrow, narrow, None) == (0.05, "noise floor")
    assert threshold_for(wide, narrow, None) == (pytest.approx(0.2), "before's repeats")
    assert threshold_for(narrow, wide, None) == (pytest.approx(0.2), "after's repeats")
    assert threshold_for(wide, wide, 0.02) == (0.02, "--threshold")
    small = Side(320 * MIB, 320 * MIB, 320 * MIB, 3, "", {}, "ok")
    assert threshold_for(small, small, None) == (0.1, "noise floor")  # 32 MiB of 320 MiB


def test_verdicts_and_signs_by_hand() -> None:
    before = _result(1000 * MIB, 1000 * MIB, 1000 * MIB)
    grew = diff_row("r", before, _result(1100 * MIB, 1100 * MIB, 1100 * MIB), None)
    assert (grew.verdict, grew.change_bytes, grew.change) == ("more", 100 * MIB, pytest.approx(0.1))
    shrank = diff_row("r", before, _result(900 * MIB, 900 * MIB, 900 * MIB), None)
    assert (shrank.verdict, shrank.change_bytes, shrank.change) == ("less", -100 * MIB, pytest.approx(-0.1))
    same = diff_row("r", before, _result(1040 * MIB, 1040 * MIB, 1040 * MIB), None)
    assert same.verdict == "same" and same.threshold == 0.05
    assert diff_row("r", before, _result(1049 * MIB, 1049 * MIB, 1049 * MIB), None).verdict == "same"
    assert diff_row("r", before, _result(951 * MIB, 951 * MIB, 951 * MIB), None).verdict == "same"
    assert diff_row("r", None, before, None).verdict == "only after"
    assert diff_row("r", before, None, None).verdict == "only before"
    failed = diff_row("r", before, _result(0, 0, 0, status="oom"), None)
    assert (failed.verdict, failed.reason) == ("failed", "after: oom")
    recovered = diff_row("r", _result(0, 0, 0, status="oom"), before, None)
    assert (recovered.verdict, recovered.reason) == ("not comparable", "before: oom")
    other = diff_row("r", before, _result(1000 * MIB, 1000 * MIB, 1000 * MIB, sha="def"), None)
    assert other.verdict == "not comparable" and "config_sha256" in other.reason


def test_the_phase_that_moved_most_by_hand() -> None:
    before = Side(0, 0, 0, 1, "", {"forward": 100 * MIB, "step2": 300 * MIB}, "ok")
    after = Side(0, 0, 0, 1, "", {"forward": 150 * MIB, "step2": 200 * MIB, "load": 1}, "ok")
    assert moved_most(before, after) == "step2 (−100 MiB)"
    assert moved_most(before, Side(0, 0, 0, 1, "", {}, "ok")) == ""


@pytest.mark.parametrize(("text", "value"), [("2%", 0.02), ("0%", 0.0), (" 999.5 % ", 9.995)])
def test_thresholds_parse(text: str, value: float) -> None:
    assert parse_threshold(text) == pytest.approx(value)


@pytest.mark.parametrize(("text", "reason"), [("2", "not a percentage"), ("-1%", "must be 0% or more"),
                                              ("1000%", "must be under 1000%"), ("x%", "not a percentage"),
                                              ("", "not a percentage"), ("nan%", "not a percentage")])
def test_bad_thresholds_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_threshold(text)


# ---------------------------------------------------------------- escaping


@pytest.mark.parametrize(("value", "escaped"), [
    ("a*b", "a\\*b"), ("<x>", "\\<x\\>"), ("`c`", "\\`c\\`"), ("# h", "\\# h"), ("- l", "\\- l"),
    ("1. n", "1\\. n"), ("12) n", "12\\) n"), ("> q", "\\> q"), ("===", "\\==="), ("a\nb\tc", "a b c"),
    ("plain", "plain"), ("#tag", "#tag"), ("-x", "-x"), ("[l](u)", "\\[l\\](u)"), ("a|b", "a\\|b"),
])
def test_markdown_text_by_hand(value: str, escaped: str) -> None:
    assert markdown_text(value) == escaped


def test_code_spans_lines_and_errors_by_hand() -> None:
    assert markdown_code("a`b") == "``a`b``" and markdown_code("`x") == "`` `x ``" and markdown_code("") == ""
    assert markdown_code("a|b", table=True) == "`a\\|b`" and markdown_code("a|b") == "`a|b`"
    assert one_line("  a \x1b b\n") == "a b" and last_line("x\n\n y \n") == "y" and last_line(" \n") == ""
    assert one_line_error(ValueError("first\nlast")) == "ValueError: last"
    assert one_line_error(KeyError()) == "KeyError"
    assert terminal_text("[b]x\x07") == "\\[b]x\\x07"


# ---------------------------------------------------------------- units


@pytest.mark.parametrize(("text", "size"), [("3GiB", 3 * GIB), ("512MiB", 512 * MIB), ("2.5G", int(2.5 * GIB)),
                                            ("3GB", 3 * 1000**3), ("7", 7), ("1k", 1024), ("1kb", 1000),
                                            ("1T", 1024**4), ("1tb", 1000**4), (" 2 mib ", 2 * MIB)])
def test_sizes_parse(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(("text", "reason"), [("0", "above zero"), ("-1GiB", "above zero"), ("3XB", "not a size"),
                                              ("GiB", "not a size"), ("0.0001b", "above zero")])
def test_bad_sizes_are_refused(text: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        parse_size(text)


def test_formats_by_hand() -> None:
    assert format_mib(3 * MIB + MIB // 2) == "4 MiB" and format_mib(1234 * MIB) == "1,234 MiB"
    assert format_gib(3 * GIB // 2) == "1.5 GiB" and format_gib(GIB, 0) == "1 GiB"
    assert signed_percent(0.031) == "+3.1 %" and signed_percent(-0.02, 0) == "−2 %"
    assert signed_mib(210 * MIB) == "+210 MiB" and signed_mib(-289 * MIB) == "−289 MiB"
    assert mib_range(10 * MIB, 2000 * MIB) == "10–2,000"
    assert format_size(GIB) == "1.00 GiB" and format_size(GIB - MIB) == "1,023 MiB"
    assert format_mib_above(100 * MIB, 200 * MIB) == "100 MiB"


def _selection(results: list[RowResult], environment: Environment, model: str = "m"):  # -> Selection
    from pathlib import Path

    from generator.store.catalog import Selection

    return Selection(environment=environment.id, model=model, folder=Path(environment.id),
                     results=tuple(replace(r, environment=environment) for r in results))


def test_a_whole_comparison_by_hand() -> None:
    from generator.diff.compare import DifferentModelsError, compare

    old = Environment(id="cpu-a", torch="2.1", transformers="4.0", peft="0.1", cpu="A", os="L")
    new = Environment(id="cpu-b", torch="2.1", transformers="5.0", peft="0.2", cpu="B", os="L")
    rows = [_result(100 * MIB, 100 * MIB, 100 * MIB, row=row) for row in ("train-b8-s256", "infer-b8-s256")]
    baseline = replace(_result(0, 0, 0, row="baseline"), summary=Summary(status="ok"))
    extra = _result(100 * MIB, 100 * MIB, 100 * MIB, row="train-b1-s256")
    capped = _result(50 * MIB, 50 * MIB, 50 * MIB, row="train-b8-s256-cap1GiB")
    comparison = compare(_selection([*rows, baseline, extra], old), _selection([*rows, baseline, capped], new))
    assert (comparison.model, comparison.before, comparison.after) == ("m", "cpu-a", "cpu-b")
    assert comparison.library_changes == (("transformers", "4.0", "5.0"), ("peft", "0.1", "0.2"))
    assert comparison.differences == (("cpu", "A", "B"),)
    assert [row.row for row in comparison.rows] == ["infer-b8-s256", "train-b8-s256", "train-b8-s256-cap1024MiB",
                                                    "train-b1-s256"]  # after's order, capped last, then before's
    assert [row.verdict for row in comparison.rows] == ["same", "same", "only after", "only before"]
    assert comparison.worse == ()
    with pytest.raises(DifferentModelsError, match="'m' and the after side 'n'"):
        compare(_selection(rows, old), _selection(rows, new, model="n"))


def test_a_row_diff_carries_its_reason_source_and_phase() -> None:
    before = _result(1000 * MIB, 1000 * MIB, 1000 * MIB, phases={"forward": 100 + 1000 * MIB})
    after = _result(1200 * MIB, 1200 * MIB, 1200 * MIB, phases={"forward": 100 + 1200 * MIB})
    row = diff_row("train-b8-s256", before, after, None)
    assert (row.row, row.reason, row.threshold_source, row.moved_most) == (
        "train-b8-s256", "", "noise floor", "forward (+200 MiB)")
    assert (row.before.net_bytes, row.after.net_bytes) == (1000 * MIB, 1200 * MIB)  # type: ignore[union-attr]
    only = diff_row("x", None, after, None)
    assert (only.change_bytes, only.change, only.threshold, only.threshold_source, only.moved_most,
            only.reason) == (0, 0.0, 0.0, "", "", "")
    assert only.before is None and only.after is not None
    gate = diff_row("x", before, _result(0, 0, 0, status="killed"), None)
    assert gate.verdict in ("failed",) and gate.after is not None and gate.after.status == "killed"


def test_a_side_without_phases_or_finished_repeats() -> None:
    result = _result(500, 0, 0, repeats=0, phases={})
    figures = side(result)
    assert (figures.peak_phase, figures.phase_net_bytes, figures.min_bytes, figures.max_bytes, figures.repeats) == (
        "", {}, 500, 500, 1)
    low = side(_result(500, 400, 600, phases={"load": 50}))
    assert low.phase_net_bytes == {"load": 0}  # a phase below the baseline counts as none, never negative


def test_a_failed_summary_keeps_its_cap_method() -> None:
    failed = summarize([_repeat(0, status="oom", phase="step2", lora_targets="q")], "cgroup v2 memory.max")
    assert failed.memory_limit_method == "cgroup v2 memory.max" and failed.lora_targets == "q"


# ---------------------------------------------------------------- the overhead model


def _environment_of(catalog, folder):
    return catalog.every_result(folder)[0].environment


def test_the_overhead_model_by_hand() -> None:
    """Fitted on this environment's finished, uncapped rows with predictions; else the first other folder that
    has three; the pairs and the words by hand."""
    from pathlib import Path

    from generator.answers.overhead import measured_pairs, overhead_model
    from generator.store.catalog import Catalog
    from generator.store.layout import environments

    root = Path(__file__).resolve().parent.parent / "measurements"
    catalog = Catalog(root)
    folders = environments(root)
    mine = next(f for f in reversed(folders) if len(measured_pairs(catalog.every_result(f))) >= 3)
    results = catalog.every_result(mine)
    pairs = measured_pairs(results)
    expected = [(r.prediction.tensor_peak_bytes, r.summary.net_peak_bytes) for r in results  # type: ignore[union-attr]
                if r.prediction is not None and r.summary.ok and r.row.mode != "baseline"
                and not r.row.memory_limit_bytes and r.row.allocator == "glibc"]
    assert pairs == expected and len(pairs) >= 3
    model = overhead_model(catalog, _environment_of(catalog, mine))
    assert model.rows == len(pairs) and model.source.endswith(f"in {mine.name}")
    models = sorted({r.model.name for r in results if r.prediction is not None})
    assert model.source == f"{len(pairs)} measured rows of {', '.join(models)} under glibc in {mine.name}"
    line = fit_line([t for t, _ in pairs], [m for _, m in pairs])
    assert line is not None and model.proportional == pytest.approx(line.slope - 1)
    assert model.fixed == pytest.approx(line.intercept)
    here = replace(_environment_of(catalog, mine), id="cpu-no-such-environment")
    elsewhere = overhead_model(catalog, here)  # borrowed: the newest rows with these library versions
    same = [f for f in folders if len(measured_pairs(catalog.every_result(f))) >= 3
            and _environment_of(catalog, f).transformers == here.transformers]
    newest = max(same, key=lambda f: max(r.measured_at for r in catalog.every_result(f)
                                         if r.prediction is not None and r.finished))
    assert f"in {newest.name}, borrowed: cpu-no-such-environment has no such rows" in elsewhere.source
    empty = overhead_model(Catalog(root / "no-such-folder"), replace(here, id="x"))
    assert empty.rows == 0 and empty.source.startswith("no overhead")


def test_a_capped_or_unpredicted_row_is_not_a_pair() -> None:
    from generator.answers.overhead import measured_pairs
    from generator.store.records import Prediction

    prediction = Prediction(tensor_peak_bytes=50, phase="step2", weights_bytes=0, gradients_bytes=0,
                            optimizer_bytes=0, activations_bytes=50, parameters=1, trainable_parameters=1, method="m")
    good = replace(_result(100, 100, 100), prediction=prediction)
    capped = replace(_result(100, 100, 100, row="train-b8-s256-cap1GiB"), prediction=prediction)
    failed = replace(_result(0, 0, 0, status="oom"), prediction=prediction)
    assert measured_pairs([good, capped, failed, _result(100, 100, 100)]) == [(50, 100)]


def test_three_pairs_are_enough_and_unpredicted_models_are_not_named(tmp_path) -> None:
    from generator.answers.overhead import overhead_model
    from generator.store.catalog import Catalog
    from generator.store.codec import save
    from generator.store.records import Prediction

    folder = tmp_path / "cpu-x" / "m"
    for batch, tensor in ((1, 100), (2, 200), (4, 400)):
        prediction = Prediction(tensor_peak_bytes=tensor * MIB, phase="step2", weights_bytes=0, gradients_bytes=0,
                                optimizer_bytes=0, activations_bytes=tensor * MIB, parameters=1,
                                trainable_parameters=1, method="m")
        net = 2 * tensor * MIB
        save(replace(_result(net, net, net, row=f"train-b{batch}-s256"), prediction=prediction), folder)
    model = overhead_model(Catalog(tmp_path), Environment(id="cpu-x"))
    assert (model.rows, model.proportional, model.source) == (3, pytest.approx(1.0),
                                                              "3 measured rows of m under glibc in cpu-x")


def test_a_set_ups_row_on_several_cards_by_hand() -> None:
    from generator.answers.setups import row_template

    assert row_template("mixed-precision training") == "train-b{b}-s{s}-amp"
    assert row_template("mixed-precision training", ("zero3", 8)) == "train-b{b}-s{s}-amp-zero3x8"
    assert row_template("LoRA on a bf16 base", ("ddp", 16)) == "train-b{b}-s{s}-bf16-lora8-ddpx16"
    assert row_template("generation", ("zero3", 8)) == "gen-b{b}-s{s}-n32-bf16"  # each card runs it whole


def test_the_calculators_data_cannot_end_its_script_element() -> None:
    from generator.report.calculator import CalculatorData

    assert CalculatorData('{"a": "</script><b>&amp;"}').script_json() == (
        '{"a": "\\u003c/script\\u003e\\u003cb\\u003e\\u0026amp;"}')


def test_a_direction_by_its_sign() -> None:
    from generator.report.claims import Direction, _direction

    assert [_direction(change) for change in (-0.01, 0.0, 0.01)] == [Direction.FALL, Direction.LEVEL, Direction.RISE]


def test_the_large_models_shares_at_one_half_and_without_its_curve() -> None:
    from generator.report.claims import large_model
    from generator.store.fit_table import Curve, FitTable, Simulated

    example = (Simulated(model="big", task="train all of it", row="train-b1-s512-bf16", tensor_peak_bytes=16_000),)
    curve = Curve(model="big", config_sha256="c", parameters=1000, setup="k", row="r", batches=(1, 2),
                  tensor_bytes=(1, 2), cuda_bytes=(1, 2))
    found = large_model(FitTable(libraries="t", environment="e", seq_len=1, curves=(curve,), example=example))
    assert found is not None and found.fixed.n_bytes == 8000 and found.fixed_dominate  # 8 P of 16 P: one half
    assert large_model(FitTable(libraries="t", environment="e", seq_len=1, curves=(), example=example)) is None
