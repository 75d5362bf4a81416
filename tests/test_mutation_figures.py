"""Fast, exact tests of the results codec, fit's search, and the article's findings and context, each against
figures worked out by hand from synthetic rows, so that a planted bug fails a test (`nox -s mutation`)."""

import re
import tomllib
from dataclasses import replace
from pathlib import Path

import pytest
import tomli_w

from generator.answers import fit as fit_answers
from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.answers.fit import expected_peak
from generator.answers.setups import KINDS
from generator.budget import ProcessModel
from generator.matrix import parse_row
from generator.model_source import ModelError
from generator.predict import fit as fit_search
from generator.report.article import build_context, built_on, environment_table
from generator.report.findings import capped_runs, compare, findings, headline, noise, token_fit, verdict
from generator.report.views import Figure, OverheadSummary, Ratio, row_view
from generator.store.codec import load_file, parse, save, to_toml
from generator.store.environment import Environment
from generator.store.fit_table import FitTable, Simulated
from generator.store.records import ModelInfo, Prediction, Repeat, ResultsError, RowResult, Summary
from generator.units import MIB

P = 1_000_000  # parameters: fp32 weights are 4,000,000 bytes
MODEL = ModelInfo("tiny", "random-init", "ref", "sha", P, P)
ENV = Environment(id="cpu-x", python="3.11", torch="2.13", transformers="5.24", peft="0.21", device="cpu",
                  cpu="EPYC", cpu_count=2, cpu_features="avx2", total_memory_bytes=2 * 1024 ** 3, os="Linux")


def _row(row_id: str, net: int, *, spread: tuple[int, int] = (0, 0), nets: tuple[int, ...] = (),
         status: str = "ok", phase: str = "", trainable: int = P, measured_at: str = "2026-01-02T00:00:00",
         prediction: int = 0, phases: dict[str, int] | None = None, anon: tuple[int, ...] = (),
         files: tuple[int, ...] = (), wall: float = 10.0) -> RowResult:
    """A row whose net peak is `net` over a 100-byte baseline, with repeats of the given nets."""
    low, high = spread if spread != (0, 0) else (net, net)
    summary = Summary(status=status, phase=phase, net_peak_bytes=net if status == "ok" else 0,
                      net_peak_min_bytes=low, net_peak_max_bytes=high, baseline_bytes=100,
                      peak_rss_bytes=100 + net, wall_seconds=wall, startup_seconds=1.0, load_seconds=1.5,
                      phase_peak_bytes=phases if phases is not None else {"forward": 100 + net})
    repeats = tuple(Repeat(status=status, baseline_bytes=100, peak_rss_bytes=100 + n,
                           phase_peak_bytes={"step2": 100 + n},
                           phase_rss_anon_bytes={"step2": anon[i]} if anon else {},
                           phase_rss_file_bytes={"step2": files[i]} if files else {})
                    for i, n in enumerate(nets or (net,)))
    predicted = Prediction(tensor_peak_bytes=prediction, phase="step2", weights_bytes=1, gradients_bytes=1,
                           optimizer_bytes=1, activations_bytes=1, parameters=P, trainable_parameters=trainable,
                           method="fake") if prediction else None
    return RowResult(row=parse_row(row_id), model=replace(MODEL, trainable_parameters=trainable),
                     environment=ENV, summary=summary, measured_at=measured_at, repeats=repeats,
                     prediction=predicted, method_version=2)


# ---------------------------------------------------------------- codec


def test_a_row_round_trips_and_its_text_is_sorted_and_rounded(tmp_path: Path) -> None:
    result = replace(_row("train-b8-s256", 5000, prediction=4000), repeats=(
        Repeat(status="ok", baseline_bytes=100, peak_rss_bytes=5100, step_seconds=(1.23456, 2.0)),))
    text = to_toml(result)
    assert "step_seconds = [\n    1.235,\n    2.0,\n]" in text
    assert text.index("measured_at") < text.index("method_hash") < text.index("method_version")
    assert text.index("[environment]") < text.index("[model]") < text.index("[prediction]") < text.index("[result]")
    path = save(result, tmp_path)
    assert path == tmp_path / "train-b8-s256.toml"
    assert load_file(path) == replace(result, repeats=(replace(result.repeats[0], step_seconds=(1.235, 2.0)),))
    assert "[prediction]" not in to_toml(replace(result, prediction=None))
    assert parse(to_toml(replace(result, prediction=None)), path).prediction is None


def _in_result(text: str, old: str, new: str) -> str:
    """The text with one key of its [result] table changed."""
    head, _, tail = text.partition("\n[result]\n")
    assert old in tail
    return f"{head}\n[result]\n{tail.replace(old, new, 1)}"


def _refused(text: str, name: str = "train-b8-s256.toml") -> str:
    with pytest.raises(ResultsError) as error:
        parse(text, Path(name))
    return str(error.value)


def test_each_damage_is_refused_with_the_file_and_the_key() -> None:
    text = to_toml(_row("train-b8-s256", 5000))
    assert "expected train-b8-s256.toml" in _refused(text, "train-b4-s256.toml")
    assert parse(text, Path("train-b8-s256.txt")).row.id == "train-b8-s256"  # only .toml names are checked
    assert "'parameters' = -1 is negative" not in _refused(text.replace("parameters = 1000000", "parameters = -1"))
    assert "parameters = -1 is negative" in _refused(text.replace("parameters = 1000000", "parameters = -1"))
    assert "[model] has no 'parameters'" in _refused(text.replace("\nparameters = 1000000\n", "\n"))
    assert "is not of the expected type" in _refused(text.replace('name = "tiny"', "name = 3"))
    assert "is not of the expected type" in _refused(text.replace("parameters = 1000000", "parameters = true"))
    assert "status 'maybe' is not one of" in _refused(_in_result(text, 'status = "ok"', 'status = "maybe"'))
    assert "mode 'walk' is not one of" in _refused(text.replace('mode = "train"', 'mode = "walk"'))
    assert "dtype 'int3' is not one of" in _refused(text.replace('dtype = "float32"', 'dtype = "int3"'))
    assert "[row]" in _refused(text.replace("batch_size = 8", "batch_size = 0"))
    assert "[result] is missing or is not a table" in _refused(text.replace("[result", "[resultx"))
    assert "must be an array of tables" in _refused(text.replace("[[repeats]]", "repeats = 3\n[[repeatsx]]"))


def test_a_finished_row_without_memory_above_its_baseline_is_damaged() -> None:
    assert "is damaged" in _refused(to_toml(replace(_row("train-b8-s256", 5000), summary=replace(
        _row("train-b8-s256", 5000).summary, net_peak_bytes=0))))
    assert "is damaged" in _refused(to_toml(replace(_row("train-b8-s256", 5000), summary=replace(
        _row("train-b8-s256", 5000).summary, peak_rss_bytes=100))))
    one_byte = _row("train-b8-s256", 1)
    assert parse(to_toml(one_byte), Path("train-b8-s256.toml")).summary.net_peak_bytes == 1
    failed = _row("train-b8-s256", 0, status="oom", phase="step2")
    assert parse(to_toml(failed), Path("train-b8-s256.toml")).summary.status == "oom"


def test_step_seconds_must_be_numbers() -> None:
    text = to_toml(replace(_row("train-b8-s256", 5000), repeats=(
        Repeat(status="ok", baseline_bytes=100, peak_rss_bytes=5100, step_seconds=(1.0, 2.0)),)))
    assert "step_seconds must be numbers" in _refused(text.replace("1.0,", '"x",'))
    assert "step_seconds must be numbers" in _refused(text.replace("1.0,", "true,"))
    parsed = parse(text.replace("1.0,", "1,"), Path("train-b8-s256.toml"))
    assert parsed.repeats[0].step_seconds == (1.0, 2.0) and isinstance(parsed.repeats[0].step_seconds[0], float)


def test_top_level_defaults_and_float_fields() -> None:
    text = to_toml(_row("train-b8-s256", 5000))
    parsed = parse(re.sub(r'tool_version = ".*"\n', "", text).replace('method_hash = ""\n', ""),
                   Path("train-b8-s256.toml"))
    assert (parsed.tool_version, parsed.method_hash, parsed.method_version) == ("", "", 2)
    assert "has no 'measured_at'" in _refused(text.replace('measured_at = "2026-01-02T00:00:00"\n', ""))
    whole = parse(text.replace("wall_seconds = 10.0", "wall_seconds = 10"), Path("train-b8-s256.toml"))
    assert whole.summary.wall_seconds == 10.0 and isinstance(whole.summary.wall_seconds, float)
    assert "[result.phase_peak_bytes] forward" in _refused(text.replace("forward = 5100", "forward = -5"))


# ---------------------------------------------------------------- fit's search


class _Curve:
    """A predictor over a made-up curve: peak(batch) in bytes, with every simulation counted."""

    def __init__(self, peak, fail: Exception | None = None) -> None:
        self.curve, self.fail, self.cache, self.parameters = peak, fail, {}, 0
        self.host: dict[str, int] = {}  # no host memory beside the card
        self.curves: dict = {}  # no recorded curve: every answer is searched over simulations

    def peak(self, row_id: str) -> int:
        if self.fail is not None:
            raise self.fail
        batch = parse_row(row_id).batch_size
        self.cache[row_id] = self.curve(batch)
        return self.cache[row_id]

    def template(self, kind: str) -> str:
        return KINDS[kind]

    def allowance(self, row) -> int:  # no allowance on any row's peak
        return 1_000_000


@pytest.mark.parametrize(("usable", "batch"), [(99, 0), (100, 1), (109, 1), (110, 2), (1085, 99), (1090, 100),
                                               (10_000, 991), (10_330, 1024), (10**6, 1024)])
def test_the_search_by_hand_on_a_line(usable: int, batch: int) -> None:
    answer = fit_search.largest_batch(_Curve(lambda b: 90 + 10 * b), "full training", 256, usable)  # type: ignore
    assert answer.batch == batch and answer.usable_bytes == usable and answer.kind == "full training"
    shown = max(batch, 1)
    assert answer.row == f"train-b{shown}-s256" and answer.predicted_bytes == 90 + 10 * shown
    assert answer.next_bytes == (0 if batch == 1024 else 90 + 10 * (batch + 1))
    # batches 2 and 3, the line's proposal and the batch after it: four simulations on a straight line; batch 1
    # only where batch 2 does not fit
    assert answer.simulations == {0: 2, 1: 2, 2: 2, 1024: 3}.get(batch, 4)


def test_interpolation_counts_on_a_curve_the_line_misjudges() -> None:
    convex = lambda b: 1000 + 10 * b * b  # noqa: E731
    answer = fit_search.largest_batch(_Curve(convex), "full training", 256, 50_000)  # type: ignore[arg-type]
    # every second guess at least halves the bracket [3, 1024]: at most 3 + 2 × 10 simulations, where plain
    # interpolation from the low end crept up one batch at a time (37 simulations)
    assert answer.batch == 70 and answer.next_bytes == 1000 + 10 * 71 * 71 and answer.simulations <= 23


def test_the_search_on_an_uneven_curve_and_a_long_sequence() -> None:
    steps = lambda b: 1000 + 100 * b + (400 if b > 5 else 0)  # noqa: E731 - a jump between 5 and 6
    assert fit_search.largest_batch(_Curve(steps), "LoRA", 256, 1599).batch == 5  # type: ignore[arg-type]
    assert fit_search.largest_batch(_Curve(steps), "LoRA", 256, 2000).batch == 6  # type: ignore[arg-type]
    flat = fit_search.largest_batch(_Curve(lambda b: 50), "inference", 4096, 100)  # type: ignore[arg-type]
    assert flat.batch == 256 and flat.next_bytes == 0 and flat.row == "infer-b256-s4096"  # 2**20 tokens a step
    one = fit_search.largest_batch(_Curve(lambda b: 50 * b), "inference", 32768, 10_000)  # type: ignore[arg-type]
    assert (one.batch, one.next_bytes) == (32, 0)


def test_the_interpolation_by_hand() -> None:
    assert fit_answers._interpolate(1, 100, 11, 200, 150) == 6
    assert fit_answers._interpolate(1, 100, 11, 200, 101) == 2  # strictly above fits
    assert fit_answers._interpolate(1, 100, 11, 200, 199) == 10  # strictly below too_big
    assert fit_answers._interpolate(2, 100, 20, None, 150) == 4  # double while nothing is known too big
    assert fit_answers._interpolate(8, 100, 12, None, 150) == 10  # or the midpoint, if that is smaller
    assert fit_answers._interpolate(2, 100, 21, 100, 150) == 11  # a flat line: the midpoint, a whole batch
    assert fit_answers._interpolate(1, 100, 11, 200, 250) == 10  # past too_big's peak: still below too_big


def test_every_kind_answers_and_margins_come_off_the_budget() -> None:
    answers = fit_search.fit(_Curve(lambda b: 100 * b), 256, 1000, margin=0.2)  # type: ignore[arg-type]
    assert [a.kind for a in answers] == list(fit_search.KINDS)
    assert {a.batch for a in answers} == {8} and {a.usable_bytes for a in answers} == {800}
    assert fit_search.fit(_Curve(lambda b: 100 * b), 256, 1000)[0].usable_bytes == 900  # type: ignore[arg-type]
    assert fit_search.STATED_MARGIN == 0.10  # answers/margin.py's, the stated margin


def test_a_kind_that_cannot_be_simulated_carries_its_reason() -> None:
    failed = fit_search.answer_or_reason(_Curve(lambda b: 1, RuntimeError("no targets\nfor LoRA")),  # type: ignore
                                         "LoRA", 256, 1000)
    assert (failed.batch, failed.row, failed.simulations, failed.usable_bytes) == (0, "train-b1-s256-lora8", 0, 1000)
    assert failed.error == "RuntimeError: for LoRA" and failed.kind == "LoRA"
    assert (failed.predicted_bytes, failed.next_bytes) == (0, 0)
    with pytest.raises(ModelError):
        fit_search.answer_or_reason(_Curve(lambda b: 1, ModelError("bad config")), "LoRA", 256, 1000)  # type: ignore


def test_the_predictor_simulates_each_row_once() -> None:
    calls = []

    def simulator(row, source):
        calls.append(row.id)
        return Prediction(tensor_peak_bytes=1000 * row.batch_size, phase="", weights_bytes=0, gradients_bytes=0,
                          optimizer_bytes=0, activations_bytes=0, parameters=0, trainable_parameters=0, method="")

    def simulator_with_source(row, source):
        assert source == "the source"
        return simulator(row, source)

    predictor = fit_search.Predictor("the source", ProcessModel(0.5, 10.0, 3, "x"),  # type: ignore[arg-type]
                                     simulator_with_source)
    assert predictor.peak("train-b2-s256") == 3010 and predictor.peak("train-b2-s256") == 3010
    assert calls == ["train-b2-s256"]
    again = fit_search.largest_batch(predictor, "full training", 256, 5010)  # type: ignore[arg-type]
    assert again.batch == 3 and again.simulations == 2  # batch 2 was simulated already: 3 and 4 are new


# ---------------------------------------------------------------- findings


def _views(*results: RowResult, process: ProcessModel | None = None):
    return {r.row.id: row_view(r, P, process) for r in results}


def test_a_comparison_by_hand() -> None:
    views = _views(_row("train-b8-s256", 3000), _row("infer-b8-s256", 1000), _row("train-b1-s256", 0, status="oom"))
    found = compare(views["train-b8-s256"], views["infer-b8-s256"])
    assert found is not None and (found.ratio.value, found.saving.value, found.change.value) == (3, -2, 2)
    assert found.change.text == "+200 %" and found.subject.id == "train-b8-s256"
    assert compare(views["infer-b8-s256"], views["train-b8-s256"]).change.text == "−67 %"  # type: ignore[union-attr]
    assert compare(None, views["infer-b8-s256"]) is None and compare(views["infer-b8-s256"], None) is None
    assert compare(views["train-b1-s256"], views["infer-b8-s256"]) is None
    assert compare(views["infer-b8-s256"], views["train-b1-s256"]) is None


def test_the_token_fit_by_hand() -> None:
    rows = [_row(f"train-b{b}-s256", 1000 + 3 * MIB * b) for b in (1, 2, 4)]
    fit = token_fit(list(_views(*rows).values()), 256)
    assert fit is not None and fit.per_token.n_bytes == round(3 * MIB / 256) and fit.intercept.n_bytes == 1000
    assert fit.per_token.text == "0.01 MiB" and fit.r_squared.text == "1.0000"
    assert fit.rows == ("train-b1-s256", "train-b2-s256", "train-b4-s256")
    assert token_fit(list(_views(*rows[:2]).values()), 256) is None  # two lengths make no line
    assert token_fit(list(_views(*rows).values()), 512) is None
    same = [_row(f"train-b{b}-s256", 1000) for b in (1, 2, 4)]
    assert token_fit(list(_views(*same).values()), 256) is None
    others = [_row("train-b8-s256-ckpt", 1), _row("train-b8-s256-bf16", 2), _row("train-b8-s256-lora8", 3),
              _row("infer-b8-s256", 4)]
    fit = token_fit(list(_views(*rows, *others).values()), 256)
    assert fit is not None and len(fit.rows) == 3


def test_the_findings_by_hand() -> None:
    rows = [_row("train-b8-s256", 8000), _row("infer-b8-s256", 2000), _row("train-b1-s256", 6000),
            _row("train-b4-s512", 8400), _row("train-b8-s256-ckpt", 4000), _row("train-b8-s256-bf16", 6000),
            _row("train-b8-s256-lora8", 2000, trainable=12_345), _row("train-b2-s256", 6500)]
    views = _views(*rows)
    found = findings(views, P, views["train-b8-s256-lora8"], 256)
    assert found.train_vs_inference is not None and found.train_vs_inference.ratio.value == 4
    assert found.train_vs_weights is not None and found.train_vs_weights.value == 8000 / 4_000_000
    assert found.floor_row is not None and found.floor_row.id == "train-b1-s256"
    assert found.floor_vs_weights is not None and found.floor_vs_weights.value == 6000 / 4_000_000
    assert found.same_tokens is not None and found.same_tokens.ratio.value == 8400 / 8000
    assert found.checkpointing is not None and found.checkpointing.ratio.value == 0.5
    assert found.half_precision is not None and found.half_precision.ratio.value == 0.75
    assert found.lora is not None and found.lora.ratio.value == 0.25
    assert (found.lora_trainable, found.lora_share, found.lora_targets) == ("12,345", "1.23 %", "")
    assert found.fit is not None and found.fit.rows == ("train-b8-s256", "train-b1-s256", "train-b2-s256")
    empty = findings({}, 0, None, 256)
    assert (empty.train_vs_inference, empty.train_vs_weights, empty.floor_row, empty.fit) == (None, None, None, None)
    assert (empty.lora_trainable, empty.lora_share) == ("0", "")
    failed = _views(_row("train-b1-s256", 0, status="oom"))
    assert findings(failed, P, None, 256).floor_row is None and findings(failed, P, None, 256).floor_vs_weights is None


def test_the_noise_by_hand() -> None:
    rows = [_row("train-b8-s256", 1000, nets=(900, 1000, 1200), anon=(50, 80, 60), files=(7, 7, 9)),
            _row("train-b4-s256", 1000, nets=(1000, 1010), anon=(1, 2), files=(3, 3)),
            _row("train-b2-s256", 1000, nets=(1000,)),
            _row("infer-b8-s256-cap2MiB", 1000, nets=(1, 900000)),
            _row("train-b1-s256", 1000, nets=(900, 1000), status="oom")]
    found = noise(rows)
    assert found is not None and (found.rows, found.widest_row) == (2, "train-b8-s256")
    assert found.widest_spread.value == 0.3 and (found.file_spread.n_bytes, found.anon_spread.n_bytes) == (2, 30)
    assert noise(rows[2:3]) is None
    no_phases = replace(rows[0], repeats=tuple(replace(r, phase_peak_bytes={}) for r in rows[0].repeats))
    assert noise([no_phases]).file_spread.n_bytes == 0  # type: ignore[union-attr]


def test_capped_runs_and_the_headline_by_hand() -> None:
    steps = {"load": 500, "forward": 900, "backward": 1100, "optimizer": 1000, "step2": 1300}
    rows = [_row("train-b8-s256", 1200, phases=steps), _row("infer-b8-s256", 400),
            _row("train-b8-s256-cap1000MiB", 0, status="oom", phase="step2"),
            _row("infer-b8-s256-cap2000MiB", 400)]
    views = _views(*rows)
    runs = capped_runs(rows, views)
    assert [run.row.id for run in runs] == ["train-b8-s256-cap1000MiB", "infer-b8-s256-cap2000MiB"]
    died, lived = runs
    assert (died.step1_peak.n_bytes, died.step2_peak.n_bytes) == (1100, 1300)  # type: ignore[union-attr]
    assert died.completed_step1 and died.died_in and died.cap == "1,000 MiB" and died.row_cap_bytes == 1000 * MIB
    assert died.peak_reached is not None and died.peak_reached.n_bytes == 100
    assert lived.completed_step1 and lived.died_in == "" and lived.step2_peak is None
    assert lived.step1_peak is not None and lived.step1_peak.n_bytes == 500
    in_step1 = capped_runs([replace(rows[2], summary=replace(rows[2].summary, phase="step1"))], views)
    assert not in_step1[0].completed_step1 and in_step1[0].step1_peak is None
    top = headline(views, 256, runs)
    assert top is not None and top.ratio.value == 1200 / 400 and top.limit is not None
    assert top.limit.n_bytes == 1000 * MIB and top.inference.id == "infer-b8-s256"
    assert top.inference_under_limit  # inference's process peaked at 500 bytes, under the 1,000 MiB cap
    above = _views(rows[0], _row("infer-b8-s256", 2000 * MIB), *rows[2:])
    assert not headline(above, 256, capped_runs(rows, above)).inference_under_limit  # type: ignore[union-attr]
    assert headline(views, 256, runs[1:]).limit is None  # type: ignore[union-attr]
    assert headline(views, 512, runs) is None and headline({"train-b8-s256": views["train-b8-s256"]}, 256, ()) is None


def test_the_verdict_follows_the_measured_shares() -> None:
    def build(plain: int):
        rows = [_row("train-b8-s256", plain), _row("train-b1-s256", plain - 700), _row("train-b2-s256", plain - 600),
                _row("train-b8-s256-ckpt", plain // 2), _row("train-b8-s256-bf16", plain * 3 // 4),
                _row("train-b8-s256-lora8", plain // 4, trainable=1000)]
        views = _views(*rows)
        return verdict(findings(views, P, views["train-b8-s256-lora8"], 256), views, 256, None)

    heavy = build(17_000_000)  # fixed costs 16,000,000 of 17,000,000 bytes: the fixed side dominates
    assert heavy is not None and heavy.fixed_dominate and heavy.fixed.n_bytes == 16_000_000
    assert heavy.fixed_share.value == 16 / 17 and heavy.activations_share.value == pytest.approx(1 / 17)
    assert [c.subject.id for c in heavy.first] == ["train-b8-s256-lora8", "train-b8-s256-bf16"]
    assert [c.subject.id for c in heavy.then] == ["train-b8-s256-ckpt"] and heavy.overhead is None
    light = build(64_000_000)  # fixed costs a quarter: activations dominate
    assert light is not None and not light.fixed_dominate
    assert [c.subject.id for c in light.first] == ["train-b8-s256-ckpt"]
    assert [c.subject.id for c in light.then] == ["train-b8-s256-lora8", "train-b8-s256-bf16"]
    edge = build(32_000_000)  # exactly half: fixed costs count as dominating
    assert edge is not None and edge.fixed_dominate


# ---------------------------------------------------------------- the article's context


def test_the_context_by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    rows = [_row("train-b8-s256", 8000, measured_at="2026-03-04T05:06:07", prediction=7000),
            _row("infer-b8-s256", 2000, prediction=1500),
            _row("train-b8-s256-lora8", 3000, trainable=1000, measured_at="2026-02-01T00:00:00"),
            _row("train-b1-s512", 0, status="oom", phase="step2"),
            _row("train-b8-s256-cap9MiB", 0, status="oom", phase="step2"),
            replace(_row("baseline", 0), summary=Summary(status="ok", baseline_bytes=777))]
    process = ProcessModel(1.0, 500.0, 3, "three rows")
    context = build_context(rows, process)
    assert context.parameters == P and context.parameters_text == "1,000,000" and context.model_name == "tiny"
    assert context.title == "It runs, so why won't it train? Peak memory of tiny"
    assert [v.id for v in context.rows] == ["infer-b8-s256", "train-b1-s512", "train-b8-s256",
                                             "train-b8-s256-lora8"]
    assert [v.id for v in context.failed_rows] == ["train-b1-s512"]
    assert context.baseline is not None and context.baseline.n_bytes == 777
    assert (context.measured_on, context.built_on, context.environment_id) == ("2026-03-04", "2026-03-04", "cpu-x")
    assert context.has_predictions and not context.has_cuda and context.peak_method == ""
    assert context.setup_share_train_b8 is not None and context.setup_share_train_b8.value == 0.25
    assert context.overhead is not None and context.overhead.rows == 2
    assert [run.row.id for run in context.capped_runs] == ["train-b8-s256-cap9MiB"]
    assert context.findings.lora is not None and context.findings.lora.ratio.value == 3000 / 8000
    assert context.headline is not None and context.headline.ratio.value == 8000 / 2000
    assert build_context(rows[1:2]).overhead is None  # no process model: no overhead to state
    assert not build_context([_row("infer-b8-s256", 2000)]).has_predictions


def test_the_context_of_a_lora_only_model_and_its_dates(monkeypatch: pytest.MonkeyPatch) -> None:
    lora = _row("train-b8-s256-lora8", 3000, trainable=1000)
    assert build_context([lora]).parameters == P - 1000  # the base model, the adapters left out
    rows = [_row("train-b8-s256", 8000), _row("train-b2-s256", 8000), _row("train-b4-s512", 8000)]
    assert build_context(rows).findings.train_vs_weights is not None  # the common length is 256
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "86400")
    assert built_on(rows) == "1970-01-02"
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "x86400")
    assert built_on(rows) == "2026-01-02"
    table = environment_table(ENV)
    assert table["CPU"] == "EPYC (2 cores; avx2)" and table["memory"] == "2.0 GiB" and table["OS"] == "Linux"
    assert environment_table(replace(ENV, cpu_features=""))["CPU"] == "EPYC (2 cores; no flags read)"
    assert list(table) == ["Python", "torch", "transformers", "peft", "device", "CPU", "memory", "OS"]


# ---------------------------------------------------------------- edges the tests above leave open


def test_the_findings_edges() -> None:
    rows = [_row(f"train-b{b}-s256", net) for b, net in ((1, 1000), (2, 1000), (4, 2000))]
    fit = token_fit(list(_views(*rows).values()), 256)  # two distinct peaks over three lengths make a line
    assert fit is not None and fit.r_squared.value == pytest.approx(225 / 252)  # corr² of (1,2,4) and (1,1,2), by hand
    lora = replace(_row("train-b8-s256-lora8", 2000, trainable=10),
                   summary=replace(_row("train-b8-s256-lora8", 2000).summary, lora_targets="q_proj v_proj"))
    views = _views(_row("train-b8-s256", 8000), lora)
    found = findings(views, P, views["train-b8-s256-lora8"], 256)
    assert found.lora_targets == "q_proj, v_proj" and found.lora.reference.id == "train-b8-s256"  # type: ignore


def test_the_noise_edges() -> None:
    skipped_first = [_row("baseline", 0, nets=(0, 500)), _row("train-b2-s256", 0, nets=(0, 0, 5)),
                     _row("train-b8-s256", 1000, nets=(900, 1000, 1100), anon=(1, 2, 4), files=(5, 6, 5))]
    found = noise(skipped_first)
    assert found is not None and (found.rows, found.widest_row, found.anon_spread.n_bytes) == (1, "train-b8-s256", 3)
    small = noise([_row("train-b2-s256", 1, nets=(1, 1, 2))])
    assert small is not None and small.widest_spread.value == 1.0
    two_phases = replace(skipped_first[2], repeats=tuple(
        replace(r, phase_peak_bytes={"forward": 1, "step2": 2},
                phase_rss_anon_bytes={"forward": 10 * i, "step2": 1}, phase_rss_file_bytes={"forward": 0, "step2": 0})
        for i, r in enumerate(skipped_first[2].repeats)))
    assert noise([two_phases]).anon_spread.n_bytes == 0  # type: ignore[union-attr]  # the last phase only
    bare = replace(skipped_first[2], repeats=tuple(replace(r, phase_peak_bytes={}) for r in skipped_first[2].repeats))
    assert (noise([bare]).file_spread.n_bytes, noise([bare]).anon_spread.n_bytes) == (0, 0)  # type: ignore


def test_the_capped_edges() -> None:
    alone = replace(_row("train-b8-s256-cap9MiB", 0, status="oom", phase="weird"),
                    summary=Summary(status="oom", phase="weird", memory_limit_method="RLIMIT_AS"))
    run = capped_runs([alone], _views(alone))[0]
    assert (run.step1_peak, run.step2_peak, run.peak_reached, run.method) == (None, None, None, "RLIMIT_AS")
    assert run.died_in == "weird"
    done = replace(_row("infer-b8-s256-cap9MiB", 10), summary=replace(_row("infer-b8-s256-cap9MiB", 10).summary,
                                                                       phase="step2"))
    assert capped_runs([done], _views(done))[0].died_in == ""
    died = capped_runs([_row("train-b8-s256-cap9MiB", 0, status="oom", phase="step2")],
                       _views(_row("train-b8-s256-cap9MiB", 0, status="oom", phase="step2")))[0]
    assert died.died_in == "step 2" and died.died_in != "step2"


def test_the_headline_and_verdict_edges() -> None:
    steps = {"forward": 900, "step2": 1300}
    rows = [_row("train-b8-s256", 1200, phases=steps), _row("infer-b8-s256", 400),
            _row("train-b8-s256-cap1000MiB", 0, status="oom", phase="step2")]
    views = _views(*rows)
    top = headline(views, 256, capped_runs(rows, views))
    assert top is not None and top.limit is not None and top.limit.text == "1,000 MiB"
    assert top.training.id == "train-b8-s256"
    failed = _views(_row("train-b8-s256", 0, status="oom"), _row("infer-b8-s256", 400))
    assert headline(failed, 256, ()) is None
    for net, expected in ((0, None), (1, 1200.0)):
        damaged = dict(views, **{"infer-b8-s256": replace(views["infer-b8-s256"], net=Figure(net, ""))})
        found = headline(damaged, 256, ())
        assert (found.ratio.value if found else None) == expected


def _verdict_views(plain: int):
    rows = [_row("train-b8-s256", plain), _row("train-b1-s256", plain - 700), _row("train-b2-s256", plain - 600),
            _row("train-b8-s256-ckpt", plain // 2), _row("train-b8-s256-bf16", plain * 3 // 4),
            _row("train-b8-s256-lora8", plain // 4, trainable=1000)]
    return _views(*rows)


def test_the_verdict_edges() -> None:
    views = _verdict_views(32_000_000)
    found = findings(views, P, views["train-b8-s256-lora8"], 256)
    overhead = OverheadSummary(rows=3, low=Ratio(0.1, ""), high=Ratio(0.3, ""), median=Ratio(0.2, "20 %"),
                               largest_row="x", process_model="m")
    edge = verdict(found, views, 256, overhead)
    assert edge is not None and [c.subject.id for c in edge.first] == ["train-b8-s256-lora8", "train-b8-s256-bf16"]
    assert edge.intercept == found.fit.intercept and edge.per_token == found.fit.per_token  # type: ignore
    assert edge.overhead == Ratio(0.2, "20 %") and edge.row.id == "train-b8-s256"
    plain = views["train-b8-s256"]
    for broken in (replace(plain, components=()), replace(plain, net=Figure(0, "")),
                   replace(plain, net=Figure(-1, ""))):
        assert verdict(found, dict(views, **{"train-b8-s256": broken}), 256, None) is None
    one_byte = replace(plain, net=Figure(1, ""))
    assert verdict(found, dict(views, **{"train-b8-s256": one_byte}), 256, None) is not None


def test_the_context_edges(monkeypatch: pytest.MonkeyPatch) -> None:
    baseline = replace(_row("baseline", 0), model=ModelInfo("", "", "", "", 0, 0),
                       summary=Summary(status="ok", baseline_bytes=777),
                       repeats=(Repeat(status="ok", baseline_bytes=777, peak_method="first row's"),))
    only = build_context([baseline])
    assert (only.parameters, only.rows, only.model_name, only.peak_method) == (0, (), "", "first row's")
    rows = [_row("train-b8-s256", 8000, nets=(7900, 8000, 8100), prediction=7000),
            _row("train-b1-s256", 7300), _row("train-b2-s256", 7400),
            _row("infer-b8-s256", 2000, prediction=1500, phases={"load": 600, "forward": 2100}),
            _row("train-b8-s256-lora8", 3000, trainable=1000)]
    context = build_context([*rows, baseline], ProcessModel(0.0, 500.0, 3, "three rows"))
    assert context.model_name == "tiny" and context.peak_method == "first row's"
    assert context.rows[-2].id == "train-b8-s256" and context.rows[-2].predicted.n_bytes == 7500  # type: ignore
    assert context.environment == environment_table(ENV) and context.has_cuda is False
    assert context.budget.measured_row is not None and context.budget.measured_row.id == "train-b8-s256"
    assert context.noise is not None and context.noise.widest_row == "train-b8-s256"
    assert context.verdict is not None and context.verdict.overhead == context.overhead.median  # type: ignore
    assert [line.task for line in context.example.lines] == ["run it", "train all of it"]
    assert (context.example.simulated, context.example.simulated_model) == ((), "")
    table = FitTable(libraries="l", environment="e", seq_len=256, curves=(),
                     example=(Simulated(model="Llama", task="run it", row="infer-b1-s256", tensor_peak_bytes=1000,
                                        cuda_reserved_bytes=1500),
                              Simulated(model="Other", task="train", row="train-b1-s256", tensor_peak_bytes=2000,
                                        cuda_reserved_bytes=2500)))
    simulated = build_context(rows, ProcessModel(0.0, 500.0, 3, "three rows"), table).example
    assert simulated.simulated_model == "Llama"
    assert [s.need.n_bytes for s in simulated.simulated] == [1500 + CUDA_CONTEXT_BYTES, 2500 + CUDA_CONTEXT_BYTES]
    unbuilt = replace(_row("infer-b1-s512", 0, status="oom", phase="load"), model=ModelInfo("", "", "", "", 0, 0))
    assert build_context([unbuilt, *rows]).model_name == "tiny"  # a row that never built its model names none
    failed_baseline = replace(baseline, summary=Summary(status="oom"))
    assert build_context([*rows, failed_baseline]).baseline is None
    no_repeats = [replace(r, repeats=()) for r in rows]
    assert build_context(no_repeats).peak_method == ""


def test_the_build_date_is_a_utc_date(monkeypatch: pytest.MonkeyPatch) -> None:
    import time
    monkeypatch.setenv("TZ", "UTC-14")  # POSIX: local time is UTC + 14 hours
    time.tzset()
    try:
        monkeypatch.setenv("SOURCE_DATE_EPOCH", str(86400 - 3600))
        assert built_on([_row("train-b8-s256", 1)]) == "1970-01-01"
    finally:
        monkeypatch.delenv("TZ")
        time.tzset()


def test_every_refusal_names_the_file_and_the_table() -> None:
    text = to_toml(replace(_row("train-b8-s256", 5000, prediction=4000), method_hash="abc123"))
    name = "train-b8-s256.toml"
    assert _refused(text.replace('tool_version = "', "tool_version = 1 #"), name) == (
        f"{name}: [top level] tool_version = 1 is not of the expected type")
    assert _refused(text.replace("batch_size = 8", "batch_size = true"), name) == (
        f"{name}: [row] batch_size = True is not of the expected type")
    assert _refused(text.replace('name = "tiny"', "name = 3"), name) == (
        f"{name}: [model] name = 3 is not of the expected type")
    assert _refused(text.replace('cpu = "EPYC"', "cpu = 3"), name) == (
        f"{name}: [environment] cpu = 3 is not of the expected type")
    assert _refused(text.replace("tensor_peak_bytes = 4000", "tensor_peak_bytes = -4"), name) == (
        f"{name}: [prediction] tensor_peak_bytes = -4 is negative")
    assert _refused(_in_result(text, "wall_seconds = 10.0", 'wall_seconds = "x"'), name) == (
        f"{name}: [result] wall_seconds = 'x' is not of the expected type")
    assert _refused(text.replace("peak_rss_bytes = 5100", 'peak_rss_bytes = "x"', 1), name) == (
        f"{name}: [repeats.0] peak_rss_bytes = 'x' is not of the expected type")
    assert _refused(text.replace("forward = 5100", "forward = -1"), name) == (
        f"{name}: [result.phase_peak_bytes] forward = -1 is negative")
    assert _refused(_in_result(text, 'status = "ok"', 'status = "maybe"'), name).endswith(
        "is not one of ok, oom, killed, timeout, error")
    assert _refused(text.replace('mode = "train"', 'mode = "walk"'), name).endswith(
        "is not one of baseline, inference, train, generate")
    assert _refused(text.replace('dtype = "float32"', 'dtype = "int3"'), name).endswith(
        "is not one of float32, bfloat16, float16")
    assert _refused(text.replace("batch_size = 8", "batch_size = 0"), name).startswith(f"{name}: [row] ")
    assert _refused("schema_version = 2\n[row\n", name).startswith(f"{name}: ")
    assert _refused("schema_version = 99\n", name).startswith(f"{name}: ")
    parsed = parse(text, Path(name))
    assert parsed.method_hash == "abc123" and parsed.prediction is not None
    assert 'id = "train-b8-s256"' in text.partition("[row]")[2]
    document = tomllib.loads(text)
    del document["repeats"]
    assert parse(tomli_w.dumps(document), Path(name)).repeats == ()
    no_steps = parse(text.replace("step_seconds = []\n", ""), Path(name))
    assert no_steps.repeats[0].step_seconds == () and no_steps.repeats[0].peak_rss_bytes == 5100


# ---------------------------------------------------------------- survivors of earlier runs, killed


def test_the_order_of_the_search_by_hand() -> None:
    def searched(curve, usable: int, seq_len: int = 256) -> tuple[list[int], int]:
        predictor = _Curve(curve)
        answer = fit_search.largest_batch(predictor, "full training", seq_len, usable)  # type: ignore[arg-type]
        return [parse_row(row).batch_size for row in predictor.cache], answer.batch

    assert searched(lambda b: 90 + 10 * b, 1085) == ([2, 3, 99, 100], 99)  # the line's proposal, then one more
    assert searched(lambda b: 90 + 10 * b, 105) == ([2, 1], 1)  # batch 2 does not fit: only then batch 1
    # a jump after batch 10: the line overshoots to 15, interpolation gives 9 (2 + 1300 × 13 // 2300), then 11
    # (9 + 600 × 6 // 1600), then 10 (9 + 600 × 2 // 1200); no step left more than half its bracket
    assert searched(lambda b: 100 * b + (1000 if b > 10 else 0), 1500) == ([2, 3, 15, 9, 11, 10], 10)
    # the same jump after batch 12: 9, then 11 fits and leaves [11, 15], more than half of [9, 15], so the next
    # guess halves it (13); then 11 + 400 × 2 // 1200 = 11, raised to 12
    assert searched(lambda b: 100 * b + (1000 if b > 12 else 0), 1500) == ([2, 3, 15, 9, 11, 13, 12], 12)
    # concave past batch 3: the proposal 4 fits, and so does 5, which meets the budget exactly
    assert searched(lambda b: 100 * b if b <= 3 else 300 + 50 * (b - 3), 400)[1] == 5
    # flat: a slope of at least one byte proposes 2 + 50 // 1
    assert searched(lambda b: 50, 100, 4096)[0][:3] == [2, 3, 52]
    # the line proposes the limit, which is too big: its known peak is interpolated against, 2 + 19,980 × 1,022
    # // 1,010,220 = 22
    assert searched(lambda b: 10 * b + (10**6 if b > 600 else 0), 20_000)[0][:4] == [2, 3, 1024, 22]


def test_summaries_combine_by_each_declared_rule() -> None:
    from generator.store.summary import combine, combined, summarize

    assert combine("max", [{"x": 1}, {"x": 3}, {"x": 2}]) == {"x": 3}
    plain = summarize([Repeat(status="ok", baseline_bytes=1, peak_rss_bytes=5)])
    assert (plain.memory_limit_method, plain.repeats_note) == ("", "")
    repeats = [Repeat(status="ok", baseline_bytes=1, phase_swap_bytes={"step2": s}) for s in (1, 9, 2)]
    assert combined(repeats)["phase_swap_bytes"] == {"step2": 9} and combined(repeats)["baseline_bytes"] == 1


def test_more_codec_fields_by_hand() -> None:
    result = replace(_row("train-b8-s256", 5000), method_version=1, repeats=(
        Repeat(status="ok", baseline_bytes=100, peak_rss_bytes=5100, parameters=5, trainable_parameters=4),))
    parsed = parse(to_toml(result), Path("train-b8-s256.toml"))
    assert parsed.method_version == 1 and (parsed.repeats[0].parameters, parsed.repeats[0].trainable_parameters) == (
        5, 4)


def test_units_escaping_and_budget_edges() -> None:
    from generator.budget import process_model
    from generator.escaping import last_line, markdown_code, plain_terminal_text
    from generator.units import format_mib_above

    assert format_mib_above(100 * MIB, 100 * MIB) == "100 MiB"
    assert format_mib_above(101 * MIB, 100 * MIB) == "101 MiB"
    assert format_mib_above(100 * MIB + 100, 100 * MIB) == f"{100 * MIB + 100:,} bytes"
    assert markdown_code("a`") == "`` a` ``" and markdown_code("`a") == "`` `a ``"
    assert plain_terminal_text("a\\b") == "a\\b" and plain_terminal_text("a\nb") == "a\\nb"
    assert last_line("one\ntwo\nthree") == "three"
    assert ProcessModel(0.5, 5 * MIB, 3, "x").describe().startswith("net peak = tensor peak × 1.500 +5 MiB")
    assert process_model([], "s").source == "no overhead modelled: fewer than three measured rows with predictions"


def test_diff_edges_by_hand() -> None:
    from generator.diff.compare import Side, diff_row, moved_most, side

    def result(net: int, phases: dict[str, int], row: str = "train-b8-s256") -> RowResult:
        base = _row(row, net)
        return replace(base, summary=replace(base.summary, phase_peak_bytes=phases, net_peak_min_bytes=net,
                                             net_peak_max_bytes=net))

    assert side(result(1000, {"backward": 1200, "step2": 1100})).peak_phase == "backward"
    old = Side(1000, 1000, 1000, 3, "", {"backward": 500, "step2": 100}, "ok")
    new = Side(1000, 1000, 1000, 3, "", {"backward": 200, "step2": 50}, "ok")
    assert moved_most(old, new).startswith("backward")  # by the size of the change, not by name
    exact = diff_row("r", result(1024, {}), result(1088, {}), 0.0625)  # +6.25 %, exactly the threshold
    assert (exact.verdict, exact.threshold, exact.threshold_source, exact.row) == ("same", 0.0625, "--threshold",
                                                                                       "r")
    assert diff_row("r", result(1024, {}), result(960, {}), 0.0625).verdict == "same"  # −6.25 %
    assert diff_row("r", result(1024, {}), result(1089, {}), 0.0625).verdict == "more"
    failed = diff_row("r", result(1024, {}), replace(result(10, {}), summary=Summary(status="oom")), None)
    assert (failed.row, failed.verdict) == ("r", "failed") and failed.before is not None
    assert failed.before.net_bytes == 1024
    other = replace(result(1024, {}), model=replace(MODEL, config_sha256="other"))
    unlike = diff_row("r", result(1024, {}), other, None)
    assert (unlike.row, unlike.verdict) == ("r", "not comparable")


def test_capped_rows_come_last_in_a_diff() -> None:
    from generator.diff.compare import _ordered

    assert _ordered([_row("infer-b8-s256-cap9MiB", 5), _row("train-b8-s256", 5)]) == ["train-b8-s256",
                                                                                       "infer-b8-s256-cap9MiB"]


def test_a_threshold_given_to_compare_reaches_every_row() -> None:
    from generator.diff.compare import compare
    from generator.store.catalog import Selection

    def selection(net: int, name: str) -> Selection:
        return Selection(environment=name, model="tiny", folder=Path(name),
                         results=(replace(_row("train-b8-s256", net), environment=replace(ENV, id=name)),))

    assert compare(selection(1000, "a"), selection(1030, "b")).rows[0].verdict == "same"
    assert compare(selection(1000, "a"), selection(1030, "b"), 0.01).rows[0].verdict == "more"


def test_the_exact_tensor_diff_by_hand() -> None:
    from generator.diff.compare import diff_row, disagreement, signed_size

    def predicted(net: int, tensor: int, activations: int) -> RowResult:
        base = _row("train-b8-s256", net, prediction=tensor)
        return replace(base, prediction=replace(base.prediction, activations_bytes=activations, weights_bytes=7))

    same = diff_row("r", predicted(1000 * MIB, 500 * MIB, 100), predicted(1000 * MIB, 500 * MIB, 100), None)
    assert same.tensor is not None and (same.tensor.verdict, same.tensor.moved_most, same.tensor.disagrees) == (
        "same", "", "")
    grew = diff_row("r", predicted(1000 * MIB, 500 * MIB, 100), predicted(1000 * MIB, 500 * MIB + 128, 228), None)
    assert grew.tensor is not None and (grew.tensor.change_bytes, grew.tensor.verdict) == (128, "more")
    assert grew.tensor.moved_most == "activations and temporaries (+128 bytes)"
    assert grew.tensor.disagrees == "the tensors moved by less than the measurement can see"
    shrank = diff_row("r", predicted(1000 * MIB, 500 * MIB, 100 * MIB), predicted(1000 * MIB, 400 * MIB, 0), None)
    assert shrank.tensor is not None and shrank.tensor.verdict == "less" and shrank.tensor.change == -0.2
    assert shrank.tensor.moved_most == "activations and temporaries (−100 MiB)"
    assert shrank.tensor.disagrees == "the tensors moved beyond the measured threshold, the measurement did not"
    process = diff_row("r", predicted(1000 * MIB, 500 * MIB, 1), predicted(1200 * MIB, 500 * MIB, 1), None)
    assert process.verdict == "more" and process.tensor is not None
    assert process.tensor.disagrees.startswith("the measurement moved, the tensors did not")
    both = disagreement("more", 0.2, "more", 0.05)
    assert both == "" and disagreement("more", 0.02, "more", 0.05).startswith("the measurement moved")
    assert disagreement("more", 0.03, "more", 0.05) == ""
    assert diff_row("r", _row("train-b8-s256", 1000), predicted(1000, 5, 1), None).tensor is None
    older = predicted(1000, 5, 1)
    older = replace(older, prediction=replace(older.prediction, method="an older simulator"))
    assert diff_row("r", older, predicted(1000, 4, 1), None).tensor is None  # two simulators: not compared
    assert (signed_size(-2048), signed_size(2 * MIB)) == ("−2,048 bytes", "+2 MiB")


def test_a_tuned_row_has_a_tighter_floor_and_its_twin_defers_to_it() -> None:
    from generator.diff.compare import Side, compare, threshold_for
    from generator.store.catalog import Selection

    side = Side(1000 * MIB, 1000 * MIB, 1000 * MIB, 3, "", {}, "ok")
    assert threshold_for(side, side, None) == (0.05, "noise floor")
    assert threshold_for(side, side, None, "glibc-tuned") == (0.005, "noise floor")
    small = Side(400 * MIB, 400 * MIB, 400 * MIB, 3, "", {}, "ok")
    assert threshold_for(small, small, None, "glibc-tuned") == (0.01, "noise floor")  # 4 MiB of 400

    def selection(name: str, plain: int, tuned: int) -> Selection:
        rows = (_row("train-b8-s256", plain), _row("train-b8-s256-glibc-tuned", tuned), _row("infer-b8-s256", 10))
        return Selection(environment=name, model="tiny", folder=Path(name),
                         results=tuple(replace(r, environment=replace(ENV, id=name)) for r in rows))

    found = compare(selection("a", 1000 * MIB, 900 * MIB), selection("b", 1060 * MIB, 903 * MIB))
    by_row = {row.row: row for row in found.rows}
    assert by_row["train-b8-s256"].verdict == "more" and by_row["train-b8-s256"].judged_on == (
        "train-b8-s256-glibc-tuned")
    assert by_row["train-b8-s256-glibc-tuned"].verdict == "same" and found.worse == ()
    worse = compare(selection("a", 1000 * MIB, 900 * MIB), selection("b", 1000 * MIB, 910 * MIB))
    assert [row.row for row in worse.worse] == ["train-b8-s256-glibc-tuned"]  # +1.1 % past the 0.5 % floor
    assert {row.row: row.judged_on for row in worse.rows}["infer-b8-s256"] == ""


def test_accuracy_out_of_sample_by_hand() -> None:
    from generator.answers.accuracy import accuracy, band

    def measured(model: str, row: str, tensor: int, net: int) -> RowResult:
        base = _row(row, net, prediction=tensor)
        return replace(base, model=replace(base.model, name=model))

    # model a: net = 2 × tensor; model b: net = 2 × tensor + 30; three rows each
    rows = [measured("a", f"train-b{b}-s256", 100 * b, 200 * b) for b in (1, 2, 4)]
    rows += [measured("b", f"train-b{b}-s256", 100 * b, 200 * b + 30) for b in (1, 2, 4)]
    rows.append(replace(measured("a", "train-b8-s256-glibc-tuned", 800, 820), model=replace(MODEL, name="a")))
    found = accuracy(rows, "glibc")
    assert found is not None and len(found.rows) == 6
    held_out = {(r.model, r.row): r.out_of_sample_bytes for r in found.rows}
    assert held_out[("a", "train-b1-s256")] == 230 and held_out[("b", "train-b4-s256")] == 800
    # b's rows predicted from a's line (no +30) are under by 30: the worst is batch 1, 230 measured over 200
    assert found.margin == 0.14  # u = 230 / 200 − 1 = 0.15; m = 0.15 / 1.15 = 0.1304..., rounded up
    assert found.exceeded(found.margin) == 0 and found.exceeded(0.10) == 1
    assert found.within(0.05) == 2 and found.worst_abs() == pytest.approx(30 / 200)  # 3.75 % and 3.6 % only
    assert band(()) is None and accuracy(rows, "jemalloc") is None
    tuned = accuracy(rows, "glibc-tuned")
    assert tuned is not None and tuned.margin is None and tuned.rows[0].out_of_sample_bytes == 0


# ---------------------------------------------------------------- fit's targets, parameters and margin


def _prediction(tensor: int, cuda: int = 0, expandable: int = 0, parameters: int = 0, trainable: int = 0):
    return Prediction(tensor_peak_bytes=tensor, phase="", weights_bytes=0, gradients_bytes=0, optimizer_bytes=0,
                      activations_bytes=0, parameters=parameters, trainable_parameters=trainable, method="",
                      cuda_reserved_bytes=cuda, cuda_expandable_bytes=expandable)


def test_each_target_adds_its_own_overhead() -> None:
    model = ProcessModel(0.5, 10.0, 3, "three rows")
    predicted = _prediction(1000, cuda=3000, expandable=2000)
    assert expected_peak(predicted, model, "cpu") == 1510
    assert expected_peak(predicted, model, "gpu") == 3000 + CUDA_CONTEXT_BYTES
    assert expected_peak(predicted, model, "gpu-expandable") == 2000 + CUDA_CONTEXT_BYTES
    assert fit_search.overhead_text(model, "cpu") == model.describe()
    assert fit_search.overhead_text(model, "gpu") == (
        "the CUDA caching allocator's reserve (simulated) plus the CUDA context allowance (338 MiB); simulated, "
        "not validated on a device")
    assert fit_search.overhead_text(model, "gpu-expandable").startswith(
        "the caching allocator's reserve with expandable segments (simulated) plus the context (338 MiB)")


def test_the_predictor_counts_the_base_models_parameters() -> None:
    def simulator(row, source):
        lora = bool(row.lora_rank)
        return _prediction(1000 * row.batch_size, cuda=2000 * row.batch_size, parameters=1100 if lora else 1000,
                           trainable=100 if lora else 1000)

    model = ProcessModel(0.0, 0.0, 3, "x")
    lora_first = fit_search.Predictor(None, model, simulator)  # type: ignore[arg-type]
    assert (lora_first.target, lora_first.parameters) == ("cpu", 0)
    assert lora_first.peak("train-b2-s256-lora8") == 2000 and lora_first.parameters == 1000
    lora_first.peak("train-b4-s256")  # the first count stays
    assert lora_first.parameters == 1000
    plain = fit_search.Predictor(None, model, simulator, target="gpu")  # type: ignore[arg-type]
    assert plain.peak("train-b2-s256") == 4000 + CUDA_CONTEXT_BYTES and plain.parameters == 1000
    answer = fit_search.largest_batch(plain, "full training", 256, 10**9)
    assert answer.parameters == 1000


def test_the_default_margin_is_the_validated_band(tmp_path: Path) -> None:
    from generator.answers.margin import validated_margin

    assert validated_margin(tmp_path, "glibc", "gpu", ENV) == (
        0.10, "the stated margin for a GPU; the allocator model is not validated on a device")
    assert validated_margin(tmp_path, "glibc", "cpu", ENV)[1].endswith(  # a folder of no rows: the shipped ones
        "read from the measurements shipped with memory-budget (the folder given holds no rows)")
    for name, extra in (("a", 0), ("b", 30)):
        folder = tmp_path / ENV.id / name
        for batch in (1, 2, 4):
            base = _row(f"train-b{batch}-s256", 200 * batch + extra, prediction=100 * batch)
            save(replace(base, model=replace(base.model, name=name)), folder)
    assert validated_margin(tmp_path, "glibc", "cpu", ENV) == (
        0.14, "the band that 6 rows measured under glibc, each predicted by a model fitted without its own model, "
              "never exceeded")
    assert validated_margin(tmp_path, "glibc-tuned", "cpu", ENV) == (
        0.10, "the stated margin; no out-of-sample band under glibc-tuned anywhere yet")


def test_more_edges_of_diff_units_findings_and_the_codec(tmp_path: Path) -> None:
    from generator.answers.overhead import overhead_model
    from generator.diff.compare import diff_row, disagreement, signed_size
    from generator.store.catalog import Catalog
    from generator.units import signed_mib

    assert (signed_mib(100 * 1024), signed_mib(-100 * 1024), signed_mib(0), signed_mib(-MIB)) == (
        "0 MiB", "0 MiB", "0 MiB", "−1 MiB")
    assert (signed_size(MIB), signed_size(MIB + MIB // 4)) == ("+1 MiB", "+1 MiB")
    assert disagreement("more", 0.05, "same", 0.05) == (
        "the tensors moved beyond the measured threshold, the measurement did not")
    assert disagreement("same", 0.0, "less", 0.05).startswith("the measurement moved")
    assert disagreement("more", 0.025, "more", 0.05) == ""  # half the threshold: the tensors explain a part
    base = _row("train-b8-s256", 1000 * MIB, prediction=500 * MIB)
    one_byte = replace(base, prediction=replace(base.prediction, tensor_peak_bytes=500 * MIB + 1))
    found = diff_row("r", base, one_byte, None).tensor
    assert found is not None and (found.verdict, found.before_bytes, found.after_bytes) == (
        "more", 500 * MIB, 500 * MIB + 1)
    empty = replace(base, prediction=replace(base.prediction, tensor_peak_bytes=0))
    assert diff_row("r", empty, base, None).tensor.change == 0.0  # type: ignore[union-attr]
    tuned_views = _views(_row("train-b8-s256", 8000), _row("train-b8-s256-glibc-tuned", 6000))
    tuned = findings(tuned_views, P, None, 256).allocator
    assert tuned is not None and (tuned.subject.id, tuned.reference.id) == ("train-b8-s256-glibc-tuned",
                                                                           "train-b8-s256")
    text = to_toml(_row("train-b8-s256", 5000))
    assert _refused(text.replace('allocator = "glibc"', 'allocator = "mimalloc"')) == (
        "train-b8-s256.toml: [row] allocator 'mimalloc' is not one of glibc, glibc-tuned, jemalloc, tcmalloc")
    for batch in (1, 2, 4):
        tuned_row = _row(f"train-b{batch}-s256-glibc-tuned", 100 * batch + 7, prediction=100 * batch)
        save(tuned_row, tmp_path / "cpu-x" / "m")
    model = overhead_model(Catalog(tmp_path), ENV, "glibc-tuned")
    assert model.rows == 3 and model.fixed == pytest.approx(7.0)
    allocators = [_row(f"train-b8-s256{suffix}", 1000 + i, nets=(1000 + i,)) for i, suffix in
                  enumerate(("", "-glibc-tuned", "-jemalloc"))]
    assert build_context(allocators).allocators is not None
