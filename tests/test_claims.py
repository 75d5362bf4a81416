"""The article's sentences of direction and size follow the data: each test builds rows for one reading, renders
the page, flips the data and checks that the sentence flips too (issue: the write-up says only what its numbers
say). Figures by hand: P = 1,000,000 parameters, so fp32 weights, gradients and AdamW state are 16,000,000 bytes,
and in bf16 8,000,000."""

from dataclasses import replace
from pathlib import Path

from test_mutation_figures import P, _row, _views

from generator.report.article import build_context
from generator.report.claims import half_precision, large_model, logits_share, same_tokens
from generator.report.render import render_markdown
from generator.store.fit_table import Curve, FitTable, Simulated
from generator.store.records import Prediction


def _page(*rows, fit_table=None) -> str:
    return render_markdown(build_context(list(rows), fit_table=fit_table))["index.md"]


def test_what_halves_in_16_bit_follows_the_rest_of_the_peak() -> None:
    fp32 = _row("train-b8-s256", 40_000_000)  # rest: 24,000,000
    quarter = _row("train-b8-s256-bf16", 26_000_000)  # fixed 8,000,000, rest 18,000,000: −25 %
    half = _row("train-b8-s256-bf16", 20_000_000)  # rest 12,000,000: −50 %
    found = half_precision(*_views(quarter, fp32).values())
    assert found is not None and found.rest_change.text == "−25.0 %" and found.rest_size.text == "25 %"
    assert (found.arrays_before.n_bytes, found.arrays_after.n_bytes) == (16_000_000, 8_000_000)
    assert not found.rest_halves and found.rest_direction == "fall"
    assert "activations and the rest fall by 25 %" in _page(fp32, quarter)
    assert "so the peak does not halve" in _page(fp32, quarter)
    page = _page(fp32, half)
    assert "activations and the rest fall by half as well" in page and "does not halve" not in page
    grew = half_precision(*_views(_row("train-b8-s256-bf16", 38_000_000), fp32).values())
    assert grew is not None and grew.rest_direction == "rise" and grew.rest_size.text == "25 %"


def _with_activations(row, activations: int):
    prediction = Prediction(tensor_peak_bytes=activations + 16_000_000, phase="step2", weights_bytes=4_000_000,
                            gradients_bytes=4_000_000, optimizer_bytes=8_000_000, activations_bytes=activations,
                            parameters=P, trainable_parameters=P, method="fake")
    return replace(row, prediction=prediction)


def test_the_logits_share_is_computed_and_most_only_when_it_is() -> None:
    row = _with_activations(_row("train-b8-s256", 40_000_000), 20_000_000)
    view = _views(row)["train-b8-s256"]
    small = logits_share(view, 1_000)  # 2,048 tokens × 1,000 × 4 = 8,192,000 bytes: 41 %
    assert small is not None and small.one_copy.n_bytes == 8_192_000 and small.share.text == "41 %" and not small.most
    large = logits_share(view, 2_000)  # 16,384,000 bytes: 82 %
    assert large is not None and large.share.text == "82 %" and large.most
    assert logits_share(view, 0) is None and logits_share(_views(_row("train-b8-s256", 9))["train-b8-s256"], 9) is None


def test_tokens_or_length_is_judged_against_the_repeats() -> None:
    wider = _row("train-b8-s256", 10_000_000, spread=(9_800_000, 10_200_000))
    close = _row("train-b4-s512", 10_100_000, spread=(10_000_000, 10_300_000))
    far = _row("train-b4-s512", 10_800_000, spread=(10_700_000, 10_900_000))
    assert same_tokens(*_views(close, wider).values()).within_spread  # type: ignore[union-attr]
    other = _row("train-b1-s256", 5_000_000)  # the page's length is the one most rows have
    assert "batch and length cost the same" in _page(wider, close, other)
    found = same_tokens(*_views(far, wider).values())
    assert found is not None and not found.within_spread and found.change.text == "+8.0 %" and found.direction == "more"
    page = _page(wider, far, other)
    assert "the longer sequence needs more" in page and "attention grows with it" in page
    assert "cost the same" not in page
    cheaper = same_tokens(*_views(_row("train-b4-s512", 9_000_000), wider).values())
    assert cheaper is not None and cheaper.direction == "less" and not cheaper.within_spread


def _table(peak: int) -> FitTable:
    """The example's rows: the smallest full bf16 training row is the one judged; a larger one, a LoRA row and a
    mixed-precision row with fewer tokens are there so that picking another row changes the share."""
    curve = Curve(model="Big", config_sha256="x", parameters=P, setup="train-bf16", row="train-b{b}-s512-bf16",
                  batches=(1, 2), tensor_bytes=(peak, 2 * peak), cuda_bytes=(peak, 2 * peak))
    example = (Simulated(model="Big", task="train all of it", row="train-b4-s1024-bf16", tensor_peak_bytes=8 * peak),
               Simulated(model="Big", task="train all of it", row="train-b1-s512-bf16", tensor_peak_bytes=peak),
               Simulated(model="Big", task="LoRA", row="train-b1-s256-bf16-lora8", tensor_peak_bytes=peak // 100),
               Simulated(model="Big", task="mixed", row="train-b1-s128-amp", tensor_peak_bytes=peak // 100))
    return FitTable(libraries="l", environment="e", seq_len=512, curves=(curve,), example=example)


def test_which_fix_first_for_the_large_model_follows_its_shares() -> None:
    fixed_heavy, activation_heavy = _table(10_000_000), _table(40_000_000)  # fixed: 8,000,000 bytes in bf16
    found = large_model(fixed_heavy)
    assert found is not None and found.fixed.n_bytes == 8_000_000 and found.fixed_share.text == "80 %"
    assert (found.shape, found.peak.n_bytes) == ("batch 1 × 512", 10_000_000)
    assert found.fixed_dominate and not large_model(activation_heavy).fixed_dominate  # type: ignore[union-attr]
    rows = (_row("train-b8-s256", 40_000_000), _row("train-b1-s256", 20_000_000), _row("train-b2-s256", 25_000_000),
            _row("train-b4-s256", 30_000_000))  # fixed 40 % of the batch-8 peak: activations dominate here
    page = _page(*rows, fit_table=fixed_heavy)
    assert "80 %: there the other share dominates, so reach first for an adapter or lower precision" in page
    page = _page(*rows, fit_table=activation_heavy)
    assert "20 %: the same share dominates there" in page and "there the other share" not in page


def test_the_worked_example_computes_with_the_multiplier_it_shows() -> None:
    """The page showed '1.1×' but computed with 1.109, so 13.0 × 1.1 read as 14.5. Now the need is the weights
    times the multiplier as shown, and the model is the simulated example's real parameter count."""
    from generator.report.example import example

    views = _views(_row("infer-b8-s256", 9_000_000, phases={"load": 100 + 4_436_000, "forward": 9_000_100}))
    found = example(views, None, P, 256, ("Big", 6_000_000_000))
    (line,) = found.lines  # 4,436,000 / 4,000,000 = 1.109
    assert line.multiplier.text == "1.11×" and line.need.n_bytes == round(12_000_000_000 * 1.11)
    assert found.parameters_text == "Big's 6,000,000,000" and found.weights.n_bytes == 12_000_000_000
    assert example(views, None, P, 256).parameters_text == "a model of 7 billion"


def test_each_fix_is_compared_with_its_own_baseline() -> None:
    """fp32 LoRA against fp32 training, LoRA on a bf16 base against bf16 training: never bf16 + LoRA against
    fp32 (which read as 'LoRA saves 50 %'). Figures by hand: 30/40 and 15/20, both 25 %."""
    from generator.report.findings import findings

    rows = _views(_row("train-b8-s256", 40_000_000), _row("train-b8-s256-lora8", 30_000_000),
                  _row("train-b8-s256-bf16", 20_000_000), _row("train-b8-s256-bf16-lora8", 15_000_000))
    found = findings(rows, P, rows["train-b8-s256-bf16-lora8"], 256)
    assert found.lora is not None and (found.lora.subject.id, found.lora.reference.id) == (
        "train-b8-s256-lora8", "train-b8-s256")
    assert found.bf16_lora is not None and (found.bf16_lora.subject.id, found.bf16_lora.reference.id) == (
        "train-b8-s256-bf16-lora8", "train-b8-s256-bf16")
    assert found.lora.saving.text == "25 %" and found.bf16_lora.saving.text == "25 %"
    page = _page(*[_row(i, v.net.n_bytes) for i, v in rows.items()],  # type: ignore[union-attr]
                 _row("train-b1-s256", 10_000_000), _row("train-b2-s256", 15_000_000),
                 _row("train-b4-s256", 25_000_000))
    assert "**LoRA saves 25 %** against full fp32 training" in page
    assert "**LoRA on a bf16 base saves 25 %** against full bf16 training" in page


def test_the_per_token_rule_leaves_out_other_set_ups() -> None:
    """Plain fp32 rows on the line 10,000,000 + 1,000 a token; an amp row far off it changes nothing."""
    from generator.report.findings import token_fit

    plain = [_row(f"train-b{b}-s256", 10_000_000 + 1_000 * 256 * b) for b in (1, 2, 4, 8)]
    views = _views(*plain, _row("train-b8-s256-amp", 90_000_000), _row("train-b8-s256-ckpt", 1_000_000))
    fit = token_fit(list(views.values()), 256)
    assert fit is not None and fit.rows == ("train-b1-s256", "train-b2-s256", "train-b4-s256", "train-b8-s256")
    assert (fit.per_token.n_bytes, fit.intercept.n_bytes, fit.r_squared.text) == (1_000, 10_000_000, "1.0000")


def test_a_cpu_allocator_setting_is_never_a_first_fix() -> None:
    """The tuned allocator saves most here, yet it is not ranked among the fixes: it is named as a CPU setting."""
    rows = (_row("train-b8-s256", 40_000_000), _row("train-b1-s256", 20_000_000), _row("train-b2-s256", 25_000_000),
            _row("train-b4-s256", 30_000_000), _row("train-b8-s256-ckpt", 36_000_000),
            _row("train-b8-s256-glibc-tuned", 10_000_000))
    context = build_context(list(rows))
    verdict = context.verdict
    assert verdict is not None and [c.subject.id for c in (*verdict.first, *verdict.then)] == ["train-b8-s256-ckpt"]
    assert verdict.cpu_only is not None and verdict.cpu_only.subject.id == "train-b8-s256-glibc-tuned"
    assert "On a CPU only, and not a fix for a GPU: the tuned allocator" in _page(*rows)


def test_a_does_not_fit_cell_shows_the_budget_it_was_judged_against() -> None:
    from generator.answers.fit import FitAnswer
    from generator.report.fit_page import cell

    gib = 2**30
    answer = FitAnswer(kind="k", row="r", batch=0, predicted_bytes=round(21.64 * gib), next_bytes=0,
                       usable_bytes=round(21.6 * gib), simulations=1)
    assert cell(answer) == "does not fit: 21.64 > 21.6 GiB"  # two decimals: it must read more
    assert cell(FitAnswer(kind="k", row="r", batch=3, predicted_bytes=20 * gib, next_bytes=22 * gib,
                          usable_bytes=21 * gib, simulations=1)) == "batch 3 (20.0 GiB)"
    # a search stopped at the tool's batch limit says so: it is not an answer the budget gave
    assert cell(FitAnswer(kind="k", row="r", batch=1024, predicted_bytes=20 * gib, next_bytes=0,
                          usable_bytes=21 * gib, simulations=1)) == "batch 1024 (20.0 GiB), the tool's limit"


def test_small_spreads_keep_a_decimal() -> None:
    from generator.report.findings import small_figure
    from generator.units import MIB

    assert small_figure(round(0.4 * MIB)).text == "0.4 MiB" and small_figure(0).text == "0.0 MiB"
    assert small_figure(12 * MIB).text == "12 MiB"


def test_charts_name_their_model_machine_and_basis_and_the_line_stays_on_its_rows() -> None:
    """Each article chart's title names the model, the machine and the basis; the fitted line of the tokens chart
    spans the rows it was fitted on (batch 1 to 8 here), not the 16,384 tokens of an inference row."""
    from generator.report import charts

    rows = [_row(f"train-b{b}-s256", 10_000_000 + 1_000 * 256 * b) for b in (1, 2, 4, 8)]
    context = build_context([*rows, _row("infer-b32-s512", 9_000_000), _row("train-b8-s256-ckpt", 9_000_000)])
    for chart in (charts.memory_by_row(context), charts.peak_vs_tokens(context), charts.fixes(context)):
        spec = chart.to_dict()
        title = spec.get("title") or spec["layer"][0]["title"]
        assert title["subtitle"][0] == "tiny" and title["subtitle"][1] == "measured on EPYC", title
        assert "net peak" in title["subtitle"][2], title
    spec = charts.peak_vs_tokens(context).to_dict()
    line = next(layer for layer in spec["layer"] if layer["mark"]["type"] == "line")
    values = line["data"].get("values") or spec["datasets"][line["data"]["name"]]
    tokens = [point["tokens"] for point in values]
    assert (round(tokens[0]), round(tokens[-1])) == (256, 2048) and tokens == sorted(tokens)
    assert all(abs(point["MiB"] * 2**20 - (10_000_000 + 1_000 * point["tokens"])) < 1 for point in values)
    assert spec["layer"][1]["encoding"]["x"]["scale"]["type"] == "log"  # the 16,384-token row squeezes no row


def test_the_site_charts_name_their_model_machine_and_basis_too() -> None:
    """The versions, history and accuracy charts: model (or, for the history, that no machine is involved),
    machine and basis in the subtitle; the versions chart says whose machine each release's rows are from."""
    from pathlib import Path

    from test_mutation_figures import ENV

    from generator.report import page_charts
    from generator.report.fit_page import AccuracyPoint
    from generator.report.history import HistoryContext
    from generator.report.versions import build_versions
    from generator.store.catalog import Selection

    def side(environment, net: int) -> Selection:
        rows = tuple(replace(_row(row_id, net), environment=environment) for row_id in ("train-b1-s256",))
        return Selection(environment=environment.id, model="tiny", folder=Path(environment.id), results=rows)

    for other, across in ((replace(ENV, id="cpu-older", transformers="5.0"), False),
                          (replace(ENV, id="cpu-elsewhere", cpu="Xeon", transformers="5.0"), True)):
        chart = page_charts.versions_chart(build_versions(side(ENV, 10_000_000), [side(other, 11_000_000)]))
        subtitle = chart.to_dict()
        subtitle = (subtitle.get("title") or subtitle["layer"][0]["title"])["subtitle"]
        assert subtitle[0] == "tiny" and "net peak" in subtitle[2], subtitle
        assert ("machine its table names" in subtitle[1]) is across, subtitle
    history = HistoryContext(model="tiny", releases=("5.0", "5.24"), failed=(), points=(("train-b1-s256", "5.0", 1.0),),
                             steps=(), seconds="1 s", first="5.0", last="5.24", step_text="1 %")
    subtitle = page_charts.history_chart(history).to_dict()["title"]["subtitle"]
    assert subtitle[0] == "tiny" and "simulated tensor peaks" in subtitle[1] and "no machine" in subtitle[2]
    point = AccuracyPoint(model="tiny", row="train-b1-s256", allocator="glibc", measured=10.0, low=9.0, high=11.0,
                          predicted=10.5, held_out=True)
    subtitle = page_charts.accuracy_chart((point,), 0.05, "EPYC").to_dict()["title"]["subtitle"]
    assert subtitle[0] == "net peaks measured on EPYC" and "out of sample" in subtitle[1]


def test_the_versions_page_promises_exact_tensors_only_where_there_are_some() -> None:
    from pathlib import Path

    from test_mutation_figures import ENV

    from generator.report.render import render_page
    from generator.report.versions import build_versions
    from generator.store.catalog import Selection

    def side(environment, prediction: int) -> Selection:
        rows = tuple(replace(_row(row_id, 10_000_000, prediction=prediction), environment=environment)
                     for row_id in ("train-b1-s256", "train-b8-s256"))
        return Selection(environment=environment.id, model="tiny", folder=Path(environment.id), results=rows)

    older = replace(ENV, id="cpu-older", transformers="5.0")
    for prediction, promised in ((0, False), (5_000_000, True)):
        context = build_versions(side(ENV, prediction), [side(older, prediction)])
        page = render_page("versions", context)["versions.md"]
        assert (context.exact_rows == 2) is promised
        assert ("missing in every row here" not in page) is promised
        assert ("and the exact change of its" in page) is promised


def _shift_page(history_after: int, tensors: tuple[int, int] = (0, 0)) -> str:
    """The versions page of three training rows that fell 9.1 % from transformers 5.0 on one machine to 5.24 on
    another (11 to 10 million bytes, no repeats overlapping), while the same 5.24 on the two machines moved them
    7.4 % (10.8 to 10 million). The history records 1,000 bytes under 5.0 and `history_after` under 5.24; each
    side's own prediction, where given, is `tensors` (the newest side's, the others')."""
    from pathlib import Path

    from test_mutation_figures import ENV

    from generator.report.history import HistoryContext
    from generator.report.render import render_page
    from generator.report.versions import build_versions
    from generator.store.catalog import Selection

    ids = ("train-b1-s256", "train-b2-s256", "train-b8-s256")

    def side(environment, net: int, predicted: int) -> Selection:
        rows = tuple(replace(_row(row_id, net, prediction=predicted), environment=environment) for row_id in ids)
        return Selection(environment=environment.id, model="tiny", folder=Path(environment.id), results=rows)

    other_machine = replace(ENV, id="cpu-other", cpu="Xeon")
    older = replace(other_machine, id="cpu-older", transformers="5.0")
    peaks = {(row, "5.0"): 1000 for row in ids} | {(row, "5.24"): history_after for row in ids}
    history = HistoryContext(model="tiny", releases=("5.0", "5.24"), failed=(), points=(), steps=(),
                             seconds="1 s", first="5.0", last="5.24", peaks=peaks)
    newest, others = tensors
    context = build_versions(side(ENV, 10_000_000, newest), [side(older, 11_000_000, others),
                                                              side(other_machine, 10_800_000, others)], history)
    return render_page("versions", context)["versions.md"]


def test_a_shift_across_machines_is_called_the_machines_only_when_the_tensors_did_not_move() -> None:
    """No side carries a prediction: the release history decides the wording. Tensors identical under both
    releases make it the machines'; tensors that moved leave it open."""
    for moved in (False, True):
        page = _shift_page(1010 if moved else 1000)
        assert "3 of 3 training rows fell, each beyond the range of its own repeats (−9.1 % to −9.1 %)" in page
        assert "the same library versions on these two machines differ by −7.4 % to −7.4 % on 3 of these" in page
        assert ("are identical to the byte under every recorded release from 5.0 to 5.24" in page) is not moved
        assert ("moved across every recorded release from 5.0 to 5.24 (+1.0 % to +1.0 % in all)" in page) is moved
        assert ("so read the shift as the machines', not the release's" in page) is not moved


def test_a_shift_is_weighed_by_both_sides_own_simulations_before_the_history() -> None:
    """Each side carries its own prediction (one simulator's): those decide, and the history, which says the
    opposite here, is not consulted. Tensors of 5,000,000 bytes on both sides make the shift the machines';
    5,000,000 before and 5,050,000 after (+1.0 %) leave it open."""
    for moved in (False, True):
        page = _shift_page(1000 if moved else 1010, (5_050_000 if moved else 5_000_000, 5_000_000))
        assert "every recorded release" not in page
        assert ("both sides' simulated tensors of these 3 rows, one simulator's, are identical to the byte"
                in page) is not moved
        assert ("both sides' simulated tensors, one simulator's, moved in 3 of these 3 rows (+1.0 % to +1.0 %)"
                in page) is moved
        assert ("so read the shift as the machines', not the release's" in page) is not moved


def test_the_quoted_error_is_the_recorded_one_word_for_word() -> None:
    """The article quotes a capped row's error as the worker recorded it; its byte count is read in MiB beside
    the quote, not inside it."""
    detail = ("RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 402653184 bytes. "
              "Error code 12 (Cannot allocate memory)")
    capped = _row("train-b8-s256-cap6022MiB", 0, status="oom")
    capped = replace(capped, summary=replace(capped.summary, detail=detail, phase="step2"))
    page = _page(_row("train-b8-s256", 40_000_000), capped)
    assert ("> RuntimeError: DefaultCPUAllocator: can't allocate memory: you tried to allocate 402653184 bytes. "
            "Error code 12 (Cannot allocate memory)\n\n(402,653,184 bytes is 384 MiB.)") in page


def test_two_repeats_show_both_and_three_show_a_range() -> None:
    """With two repeats the median is only their midpoint: the brackets give both, and the note counts such rows."""
    mib = 2**20
    two = _row("train-b8-s256", 101 * mib, spread=(100 * mib, 102 * mib), nets=(100 * mib, 102 * mib))
    three = _row("train-b1-s256", 51 * mib, spread=(50 * mib, 53 * mib), nets=(50 * mib, 51 * mib, 53 * mib))
    page = _page(two, three)
    assert "**101 MiB** (100 and 102 MiB)" in page and "**51 MiB** (50–53 MiB)" in page
    assert "1 row has two repeats only: its brackets give both, and its figure is their midpoint." in page
    assert "two repeats only" not in _page(three)


def test_the_versions_tables_show_both_of_two_repeats_and_a_range_of_three() -> None:
    """The same rule in diff's cells, which the versions page places: 101 MiB of 100 and 102, 51 of 50 to 53."""
    from pathlib import Path

    from test_mutation_figures import ENV

    from generator.diff.compare import compare
    from generator.diff.render import cells
    from generator.store.catalog import Selection

    mib = 2**20
    rows = (_row("train-b8-s256", 101 * mib, spread=(100 * mib, 102 * mib), nets=(100 * mib, 102 * mib)),
            _row("train-b1-s256", 51 * mib, spread=(50 * mib, 53 * mib), nets=(50 * mib, 51 * mib, 53 * mib)))
    side = Selection(environment=ENV.id, model="tiny", folder=Path(ENV.id), results=rows)
    found = {row.row: cells(row) for row in compare(side, side).rows}
    assert found["train-b8-s256"][1] == "101 MiB (100 and 102)"
    assert found["train-b1-s256"][1] == "51 MiB (50–53)"


def test_each_fix_names_its_simulated_gpu_saving_and_the_gpu_order_only_where_it_differs() -> None:
    """Activations dominate (fixed costs are 16 of 40 MB), so the page ranks checkpointing (36/40 of the net peak)
    before bf16 (30/40). On the simulated GPU reserve checkpointing is 50/100; bf16 at 30/100 ranks first there,
    and the page gives that order. Flipped (bf16 at 80/100), both orders agree and the page says nothing more."""
    def with_reserve(result, reserve: int):
        return replace(result, prediction=replace(result.prediction, cuda_reserved_bytes=reserve))

    def page(bf16_reserve: int) -> str:
        rows = [with_reserve(_row(row_id, net, prediction=net // 2), reserve) for row_id, net, reserve in (
            ("train-b8-s256", 40_000_000, 100_000_000), ("train-b8-s256-ckpt", 36_000_000, 50_000_000),
            ("train-b8-s256-bf16", 30_000_000, bf16_reserve))]
        plain = [_row(f"train-b{b}-s256", 10_000_000 + 3_000_000 * b) for b in (1, 2, 4)]
        return _page(*rows, *plain)

    differs, agrees = page(30_000_000), page(80_000_000)
    fixes = differs.split("Measured here (net peaks), first:")[1]
    assert fixes.index("checkpointing") < fixes.index("bfloat16")
    assert "(−10 %; simulated GPU reserve −50 %)" in differs and "(−25 %; simulated GPU reserve −70 %)" in differs
    gpu_order = differs.split("On a GPU, by simulated reserve, the order is:")[1].split(".")[0]
    assert gpu_order.index("bfloat16") < gpu_order.index("checkpointing")
    assert "(−25 %; simulated GPU reserve −20 %)" in agrees
    assert "On a GPU, by simulated reserve, the order is:" not in agrees


def test_the_claims_at_their_edges() -> None:
    row = _with_activations(_row("train-b8-s256", 40_000_000), 16_384_000)
    view = _views(row)["train-b8-s256"]
    half = logits_share(view, 1_000)  # 8,192,000 of 16,384,000: one half exactly, not "most"
    assert half is not None and half.share.value == 0.5 and not half.most
    tiny = logits_share(_views(_with_activations(_row("train-b8-s256", 40_000_000), 1))["train-b8-s256"], 1)
    assert tiny is not None and tiny.activations.n_bytes == 1
    assert logits_share(_views(_with_activations(_row("train-b8-s256", 40_000_000), 0))["train-b8-s256"], 1) is None
    wider = _row("train-b8-s256", 10_000_000, spread=(9_800_000, 10_200_000))
    touching = _row("train-b4-s512", 10_400_000, spread=(10_200_000, 10_600_000))  # its low is wider's high
    found = same_tokens(*_views(touching, wider).values())
    assert found is not None and found.within_spread
    touching_below = _row("train-b4-s512", 9_600_000, spread=(9_400_000, 9_800_000))  # its high is wider's low
    assert same_tokens(*_views(touching_below, wider).values()).within_spread  # type: ignore[union-attr]
    level = same_tokens(*_views(_row("train-b4-s512", 10_000_000), wider).values())
    assert level is not None and not level.longer_needs_more and level.direction == "less"
    assert same_tokens(*_views(touching, _row("train-b8-s256", 1)).values()) is not None
    fp32, bf16 = _views(_row("train-b8-s256", 40_000_000), _row("train-b8-s256-bf16", 20_000_000)).values()
    for one, other in ((replace(bf16, components=()), fp32), (bf16, replace(fp32, components=())),
                       (replace(bf16, net=None), fp32), (bf16, replace(fp32, net=None))):
        assert half_precision(one, other) is None
    one_byte = _row("train-b8-s256", 16_000_001)
    barely = half_precision(*_views(_row("train-b8-s256-bf16", 20_000_000), one_byte).values())
    assert barely is not None and barely.rest_before.n_bytes == 1
    nothing_left = _row("train-b8-s256", 16_000_000)  # fp32's peak is its fixed arrays: no rest to compare
    assert half_precision(*_views(_row("train-b8-s256-bf16", 20_000_000), nothing_left).values()) is None


def test_same_tokens_needs_both_peaks() -> None:
    wider = _row("train-b8-s256", 10_000_000, spread=(9_800_000, 10_200_000))
    longer = _row("train-b4-s512", 10_400_000, spread=(10_200_000, 10_600_000))
    one, other = _views(longer, wider).values()
    assert same_tokens(one, replace(other, net=None)) is None
    assert same_tokens(one, replace(other, net=replace(other.net, n_bytes=0))) is None
    assert same_tokens(replace(one, net=None), other) is None


def test_what_carries_over_to_a_gpu_is_decided_by_the_two_programs_tensor_peaks() -> None:
    """The article says the tensor peaks carry over only where CUDA's simulated program allocates within 1 % of
    the CPU's on every row; otherwise it gives the range, and where it is found (a flip test of the sentence)."""
    from types import SimpleNamespace

    from generator.report.claims import gpu_carry
    from generator.report.views import figure

    def view(name: str, cpu: int, cuda: int) -> SimpleNamespace:
        return SimpleNamespace(id=name, tensor_peak=figure(cpu), simulated_gpu_tensor=figure(cuda))

    same = gpu_carry((view("a", 1000, 1000), view("b", 2000, 2005)))
    assert same is not None and same.carries and same.rows == 2
    apart = gpu_carry((view("a", 1000, 1000), view("b", 2000, 3000)))
    assert apart is not None and not apart.carries
    assert (apart.low.value, apart.row_low, apart.high.value, apart.row_high) == (0.0, "a", 0.5, "b")
    assert gpu_carry((SimpleNamespace(id="c", tensor_peak=figure(5), simulated_gpu_tensor=None),)) is None
    page = (Path(__file__).resolve().parent.parent / "site" / "index.md").read_text()
    assert "and so the ratios, the per-token cost and the simulated tensor peaks" not in page
