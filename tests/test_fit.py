"""fit: the answer fits, the next batch does not, both checked by simulating them again."""

from itertools import pairwise
from pathlib import Path

import pytest
from conftest import TINY_MODEL, run_cli

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.answers.setups import KINDS, START_ORDER
from generator.budget import ProcessModel
from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict.fit import Predictor, fit
from generator.predict.simulate import simulate
from generator.store.fit_table import Curve, FitTable, Simulated, load_fit, save_fit
from generator.store.records import ResultsError

MIB = 2**20
OVERHEAD = ProcessModel(proportional=0.08, fixed=40 * MIB, rows=3, source="a test's")


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_the_answer_fits_and_the_next_batch_does_not() -> None:
    source = resolve_model(str(TINY_MODEL))
    answers = fit(Predictor(source, OVERHEAD), seq_len=64, budget=120 * MIB, margin=0.1)
    usable = round(120 * MIB * 0.9)
    assert [answer.kind for answer in answers] == list(KINDS)  # every set-up, in the order they are declared
    for answer in answers:
        assert answer.batch >= 1, answer
        again = OVERHEAD.expected(simulate(parse_row(answer.row), source).tensor_peak_bytes)
        following = parse_row(answer.row.replace(f"-b{answer.batch}-", f"-b{answer.batch + 1}-"))
        assert again == answer.predicted_bytes <= usable < OVERHEAD.expected(
            simulate(following, source).tensor_peak_bytes) == answer.next_bytes


@pytest.mark.parametrize(("target", "budget"), [("cpu", 60 * MIB), ("gpu", 600 * MIB)])
def test_side_by_side_answers_equal_the_answers_in_order(target: str, budget: int) -> None:
    """fit --jobs 2 searches the kinds in two processes; every answer, to the byte, is the serial one."""
    source, kinds = resolve_model(str(TINY_MODEL)), ("full training", "LoRA")
    serial = fit(Predictor(source, OVERHEAD, target=target), 64, budget, 0.1, kinds)
    side_by_side = fit(Predictor(source, OVERHEAD, target=target), 64, budget, 0.1, kinds, workers=2)
    assert side_by_side == serial  # LoRA is started first (START_ORDER), and still answered second
    assert all(answer.batch >= 1 and answer.simulations >= 2 for answer in serial), serial


def test_every_set_up_has_its_place_in_the_start_order() -> None:
    """fit starts set-ups side by side longest first: every set-up is in START_ORDER, once."""
    assert sorted(START_ORDER) == sorted(KINDS) and len(set(START_ORDER)) == len(START_ORDER)
    assert START_ORDER.index("LoRA") < START_ORDER.index("full training")  # the side-by-side test's premise


def test_nothing_fits_a_budget_below_the_weights() -> None:
    (answer,) = fit(Predictor(resolve_model(None), OVERHEAD), 64, 100 * MIB, kinds=("full training",))
    assert answer.batch == 0 and answer.predicted_bytes > 90 * MIB and answer.row == "train-b1-s64"


@pytest.mark.slow  # simulates a real config or starts processes that import torch
def test_the_command_line(tmp_path: Path) -> None:
    result = run_cli("fit", "--budget", "400MiB", "--model", str(TINY_MODEL), "--seq", "64",
                     "--measurements", str(tmp_path), "--target", "cpu")
    assert result.returncode == 0, result.stderr
    assert "tiny-llama (139,584 parameters) in 400 MiB on a CPU, 64 tokens a sequence, " in result.stdout
    assert "full training (fp32 weights, gradients and AdamW state, two steps): batch" in result.stdout
    shipped = "read from the measurements shipped with memory-budget (the folder given holds no rows)"
    assert result.stderr.startswith("margin ") and result.stderr.endswith(f"{shipped}\n")  # an empty folder given
    assert result.stdout.rstrip().endswith(shipped)  # the process model too
    refused = run_cli("fit", "--model", str(TINY_MODEL))
    assert refused.returncode == 2 and "fit needs --budget" in refused.stderr


def test_the_site_table_round_trips_and_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    curve = Curve(model="m", config_sha256="abc", parameters=10, setup="infer", row="infer-b{b}-s64",
                  batches=(1, 2, 4), tensor_bytes=(100, 150, 250), cuda_bytes=(512, 1024, 1536))
    table = FitTable(libraries="torch 1, transformers 2, peft 3", environment="cpu-x", seq_len=1024,
                     curves=(curve,), example=(Simulated(model="m", task="run it", row="infer-b1-s512-bf16",
                                                         tensor_peak_bytes=1),))
    path = save_fit(table, tmp_path)
    assert load_fit(tmp_path) == table
    path.write_text(path.read_text().replace("schema_version = 4", "schema_version = 9"))
    with pytest.raises(ResultsError, match="schema version 9"):
        load_fit(tmp_path)
    for stale in (1, 2):
        path.write_text(path.read_text().replace("schema_version = 9", f"schema_version = {stale}"))
        with pytest.raises(ResultsError, match="older release"):
            load_fit(tmp_path)
        path.write_text(path.read_text().replace(f"schema_version = {stale}", "schema_version = 9"))
    path.write_text(path.read_text().replace("schema_version = 9", "schema_version = 4").replace(
        "cuda_bytes = [\n    512,\n", "cuda_bytes = [\n"))
    with pytest.raises(ResultsError, match="GPU reserve"):
        load_fit(tmp_path)


def test_a_table_that_filed_its_curves_by_set_up_names_reads_them_by_id(tmp_path: Path) -> None:
    """Schema 3 (and _curves/ schema 1) keyed each curve by the set-up's name; the loader's one upgrade
    (store/documents.py) files it by the set-up's id, and a name no set-up had stays as it was."""
    from generator.answers.setups import BY_ID, BY_NAME

    curves = tuple(Curve(model="m", config_sha256="abc", parameters=10, setup=setup, row="infer-b{b}-s64",
                         batches=(1, 2), tensor_bytes=(100, 150), cuda_bytes=(512, 1024))
                   for setup in ("full training", "LoRA on a bf16 base", "a name of another release"))
    table = FitTable(libraries="torch 1", environment="cpu-x", seq_len=64, curves=curves, example=())
    path = save_fit(table, tmp_path)
    path.write_text(path.read_text().replace("schema_version = 4", "schema_version = 3").replace("setup = ", "kind = "))
    loaded = load_fit(tmp_path)
    assert [c.setup for c in loaded.curves] == ["full", "bf16-lora", "a name of another release"]  # type: ignore
    assert all(BY_ID[BY_NAME[name].id].name == name for name in BY_NAME)  # ids and names one to one


def test_a_curve_is_exact_at_its_batches_and_on_the_chord_between() -> None:
    """A convex curve whose slope changes at every point: 10 a batch to batch 2, 20 to batch 4, 50 to batch 8.
    Figures by hand: batch 3 lies on the second chord (110 + 20), batch 6 on the third (150 + 2 × 50), batch 10
    past the end on the last segment (350 + 2 × 50); reading the first segment instead gives 120, 150 and 190."""
    curve = Curve(model="m", config_sha256="", parameters=0, setup="infer", row="infer-b{b}-s64",
                  batches=(1, 2, 4, 8), tensor_bytes=(100, 110, 150, 350), cuda_bytes=(200, 220, 300, 700))
    assert [curve.at(b) for b in (1, 2, 3, 4, 6, 8, 10)] == [100, 110, 130, 150, 250, 350, 450]
    assert [curve.cuda_at(b) for b in (1, 3, 6, 10)] == [200, 260, 500, 900]
    uneven = Curve(model="m", config_sha256="", parameters=0, setup="infer", row="infer-b{b}-s64",
                   batches=(1, 4), tensor_bytes=(0, 10), cuda_bytes=(0, 10))
    assert [uneven.at(b) for b in (2, 3)] == [3, 6]  # 10 × 1 / 3 and 10 × 2 / 3, rounded down: never below


def _chord_by_hand(batches: list[int], values: list[int], batch: int) -> int:
    """The chord rule written out independently: the segment whose right end is the first at or past the batch
    (the last one past the end), read by integer division, which rounds towards the smaller figure."""
    for index in range(1, len(batches)):
        if batch <= batches[index] or index == len(batches) - 1:
            b1, b2, v1, v2 = batches[index - 1], batches[index], values[index - 1], values[index]
            return v1 + (v2 - v1) * (batch - b1) // (b2 - b1)
    raise AssertionError("a curve has two points or more")


def test_site_answers_satisfy_the_fit_condition_on_any_curve() -> None:
    """Expectations by hand: the stated margins (10 % on a GPU, the CPU band given, 7 %), the stated context
    (287,047,680 bytes lazily loaded, plus two 32 MiB cuBLAS workspaces), and the chord rule written out above,
    never the code's own margin or chord; a GPU answer is a simulated batch."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from generator.report.fit_page import site_answers, site_budgets

    @given(st.integers(1, 2**33), st.lists(st.integers(0, 2**31), min_size=2, max_size=6),
           st.floats(0, 1), st.integers(0, 2**30))
    @settings(max_examples=200, deadline=None)
    def check(start: int, steps: list[int], proportional: float, fixed: int) -> None:
        slopes = sorted(steps)  # a convex curve: slopes that never fall
        batches = [2**i for i in range(len(slopes) + 1)]
        tensor = [start]
        for (b1, b2), slope in zip(pairwise(batches), slopes, strict=True):
            tensor.append(tensor[-1] + slope * (b2 - b1))
        cuda = [t * 2 for t in tensor]
        curve = Curve(model="m", config_sha256="", parameters=0, setup="infer", row="infer-b{b}-s1024",
                      batches=tuple(batches), tensor_bytes=tuple(tensor), cuda_bytes=tuple(cuda))
        process = ProcessModel(proportional, fixed, 3, "a test's")
        table = FitTable(libraries="", environment="", seq_len=1024, curves=(curve,), example=())
        for budget, answer in site_answers(table, process, site_budgets(0.07)):
            on_gpu = budget.target == "gpu"
            usable = round(answer.budget_bytes * (1 - (0.10 if on_gpu else 0.07)))

            def peak(batch: int, on_gpu: bool = on_gpu) -> int:
                if on_gpu:
                    return _chord_by_hand(batches, cuda, batch) + 287_047_680 + 2 * 32 * 2**20
                return round(_chord_by_hand(batches, tensor, batch) * (1 + proportional) + fixed)
            assert peak(max(answer.batch, 1)) == answer.predicted_bytes
            if on_gpu:  # settled on a simulated batch: on this growing curve, the largest simulated one that fits
                assert answer.batch == max((b for b in batches if peak(b) <= usable), default=0)
            elif answer.batch == 0:
                assert peak(1) > usable
            else:
                assert peak(answer.batch) <= usable
                assert answer.next_bytes == 0 or peak(answer.batch + 1) == answer.next_bytes > usable
    check()


def test_the_search_answers_exactly_on_any_growing_curve() -> None:
    """predicted(answer) <= usable < predicted(answer + 1) for arbitrary non-decreasing memory curves, so a
    search that stops one step early (or late) fails here."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from generator.predict.fit import largest_batch

    # uneven steps, flat stretches and jumps: where a line through two known peaks lands off the edge
    step = st.one_of(st.sampled_from([0, 1, 2, 5, 100, 1000]), st.integers(0, 2**28))

    @given(st.lists(step, min_size=1, max_size=64), st.integers(0, 2**16), st.booleans())
    @settings(max_examples=600, deadline=None)
    def check(steps: list[int], low: int, small: bool) -> None:
        curve = [sum(steps[: index + 1]) for index in range(len(steps))]
        usable = low if small else curve[-1] // 2 + low

        class Peak:
            def __init__(self) -> None:
                self.cache: dict[str, int] = {}
                self.host: dict[str, int] = {}  # no host memory beside the card
                self.curves: dict = {}  # no recorded curve: the search simulates
                self.parameters = 0

            def peak(self, row_id: str) -> int:
                batch = parse_row(row_id).batch_size
                self.cache[row_id] = curve[min(batch, len(curve)) - 1] + (max(batch - len(curve), 0) << 30)
                return self.cache[row_id]

            def template(self, kind: str) -> str:
                return KINDS[kind]

            def allowance(self, row) -> int:
                return 1_000_000
        answer = largest_batch(Peak(), "inference", 1024, usable)  # type: ignore[arg-type]
        peak = Peak()
        assert answer.batch == 0 or peak.peak(answer.row) <= usable
        following = peak.peak(f"infer-b{answer.batch + 1}-s1024") if answer.batch < 1024 else None
        assert following is None or following > usable
    check()


def test_every_answer_states_its_set_up_and_precision_and_the_real_parameter_count() -> None:
    import json

    from generator.answers.setups import KINDS
    from generator.answers.setups import RECIPES as SETUPS
    from generator.budget import ProcessModel
    from generator.predict.fit import Predictor, fit
    from generator.predict.fit_report import library_text, render_json, render_text
    from generator.store.records import Prediction

    def simulator(row, source):
        adapters = 100 if row.lora_rank else 0
        return Prediction(tensor_peak_bytes=1000 * row.batch_size, phase="", weights_bytes=0, gradients_bytes=0,
                          optimizer_bytes=0, activations_bytes=0, parameters=12_345 + adapters,
                          trainable_parameters=adapters or 12_345, method="", cuda_reserved_bytes=2000 * row.batch_size)

    model = ProcessModel(0.0, 0.0, 3, "x")
    answers = fit(Predictor(None, model, simulator), 256, 10_000)  # type: ignore[arg-type]
    text = render_text(answers, "m", 10_000, 0.1, model)
    assert "(12,345 parameters)" in text
    for kind in KINDS:
        assert f"  {kind} ({SETUPS[kind]}{library_text(kind, '; ')}): batch 9 " in text
    assert all(word in SETUPS[kind] for kind, word in (("inference", "fp32"), ("16-bit training", "bf16"),
                                                        ("LoRA", "fp32 base")))
    data = json.loads(render_json(answers, "m", 10_000, 0.1, model))
    assert {item["parameters"] for item in data} == {12_345} and all(item["setup"] for item in data)
    gpu = fit(Predictor(None, model, simulator, target="gpu"), 256, 2**31)  # type: ignore[arg-type]
    assert gpu[0].predicted_bytes == 2000 * gpu[0].batch + CUDA_CONTEXT_BYTES
    assert "not validated on a device" in render_text(gpu, "m", 2**31, 0.1, model, "gpu")


def test_a_margin_of_the_whole_budget_is_refused(tmp_path: Path) -> None:
    result = run_cli("fit", "--model", str(TINY_MODEL), "--budget", "1GiB", "--margin", "100%",
                     "--measurements", str(tmp_path))
    assert result.returncode == 2 and result.stderr.count("\n") == 1 and "--margin 100%" in result.stderr
    assert list(tmp_path.iterdir()) == []


def test_confirm_gives_a_verdict_against_the_budget() -> None:
    from generator.cli.confirm import verdict
    from generator.store.records import Summary
    from generator.units import MIB

    ok = Summary(status="ok", net_peak_bytes=900 * MIB)
    assert verdict(ok, 1000 * MIB, True) == "measured 900 MiB: within the budget (100 MiB to spare)"
    over = Summary(status="ok", net_peak_bytes=1100 * MIB)
    assert verdict(over, 1000 * MIB, True) == "measured 1,100 MiB: over the budget by 100 MiB: the answer does not fit"
    assert verdict(over, 1000 * MIB, False).endswith("over the budget by 100 MiB, as predicted")
    assert verdict(Summary(status="oom", phase="step2"), 1000 * MIB, True) == "oom in step2: the answer did not run"
