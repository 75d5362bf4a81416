"""The article's QLoRA and 8-bit AdamW section: every figure read from the rows' files, and each row compared
with the same row without the change, measured on the same machine."""

from dataclasses import replace

from conftest import TESTS

from generator.answers.accuracy import WITHIN
from generator.matrix import DEFAULT_OPTIMIZER
from generator.report.low_bit import low_bit_section
from generator.store import layout
from generator.store.catalog import Catalog
from generator.units import format_mib

MEASUREMENTS = TESTS.parent / "measurements"


def _section_and_results():
    catalog = Catalog(MEASUREMENTS)
    section = low_bit_section([catalog.every_result(folder) for folder in layout.environments(catalog.root)])
    assert section is not None, "the committed measurements hold QLoRA and 8-bit AdamW rows"
    results = {(r.model.name, r.row.id): r for r in catalog.every_result(MEASUREMENTS / section.environment)}
    return section, results


def test_each_row_is_compared_with_the_same_row_without_its_change_on_its_machine() -> None:
    section, results = _section_and_results()
    assert {row.change for row in section.rows} == {"4-bit NF4 base", "8-bit AdamW"}
    assert len({row.model for row in section.rows}) >= 2  # SmolLM2 and one more family
    for row in section.rows:
        mine, other = results[(row.model, row.row)], results[(row.model, row.against)]
        spec = mine.row
        plain = replace(spec, quantization="") if spec.quantization else replace(spec, optimizer=DEFAULT_OPTIMIZER)
        assert other.row == plain and spec != plain
        assert mine.environment.id == other.environment.id == section.environment
        assert (row.net.n_bytes, row.against_net.n_bytes) == (mine.summary.net_peak_bytes,
                                                              other.summary.net_peak_bytes)
        assert row.saved == (mine.summary.net_peak_bytes < other.summary.net_peak_bytes)
        assert row.saving.startswith("−") == row.saved
        times = sorted(sum(r.step_seconds) for r in mine.repeats if r.status == "ok")
        assert row.step_seconds == f"{times[len(times) // 2]:.1f} s ({times[0]:.1f}–{times[-1]:.1f})"


def test_the_predictions_are_judged_out_of_sample_and_counted_from_the_rows() -> None:
    """Each prediction is the process model fitted without the row's model; the summary counts the rows."""
    section, results = _section_and_results()
    errors = [row.error_share for row in section.rows if row.error_share is not None]
    assert section.judged == len(errors) > 0
    assert section.within == sum(abs(error) <= WITHIN for error in errors)
    ordered = sorted(abs(error) for error in errors)
    middle = (ordered[(len(ordered) - 1) // 2] + ordered[len(ordered) // 2]) / 2
    assert section.median_error == f"{middle * 100:.1f} %"
    for row in section.rows:
        if row.predicted is not None:
            measured = results[(row.model, row.row)].summary.net_peak_bytes
            assert row.error_share == row.predicted.n_bytes / measured - 1
        found = results[(row.model, row.row)].prediction
        if results[(row.model, row.row)].row.quantization and found is not None:
            assert row.weights.endswith(f"({format_mib(found.quantization_bytes)})") and found.quantization_bytes


def test_no_section_without_such_rows() -> None:
    catalog = Catalog(MEASUREMENTS)
    plain = [[r for r in catalog.every_result(folder) if not (r.row.quantization or r.row.optimizer != "adamw")]
             for folder in layout.environments(catalog.root)]
    assert low_bit_section(plain) is None


def test_a_few_rows_measured_later_elsewhere_do_not_take_the_article_from_a_full_matrix() -> None:
    """The bitsandbytes rows' environment is the newest with these library versions, but holds no default matrix;
    the article stays on the newest environment that holds one (a new machine's full run takes it: test_main_job)."""
    from generator.report.site import choose
    from generator.store.catalog import holds_default_matrix

    catalog = Catalog(MEASUREMENTS)
    section, _ = _section_and_results()
    article = choose(catalog, None, None)
    low_bit = catalog.select(MEASUREMENTS / section.environment, article.model)
    assert max(r.measured_at for r in low_bit.results) > max(r.measured_at for r in article.results)
    assert not holds_default_matrix(low_bit) and holds_default_matrix(article)
    assert article.environment != section.environment


def test_the_stacked_bars_split_each_row_by_its_simulation_and_its_measurement() -> None:
    """Each bar is the row's simulated split at its tensor peak (weights less the quantization constants, the
    constants, gradients, optimizer state, activations), then what the measured net peak held beyond the tensors;
    a 4-bit row's constants are its own slice, and every bar sums to the larger of its net and tensor peaks."""
    from generator.report.charts import low_bit_chart

    section, results = _section_and_results()
    spec = low_bit_chart(section).to_dict()
    records = spec["data"].get("values") or spec["datasets"][spec["data"]["name"]]
    bars: dict[str, dict[str, float]] = {}
    for record in records:
        bars.setdefault(record["row"], {})[record["component"]] = record["MiB"]
    assert len(bars) == len({(r.model, name) for r in section.rows for name in (r.row, r.against)})
    for (model, row_id), result in results.items():
        bar, found = bars.get(f"{model} {row_id}"), result.prediction
        if bar is None or found is None:
            continue
        net, tensor = result.summary.net_peak_bytes, found.tensor_peak_bytes
        assert abs(sum(bar.values()) * 2**20 - max(net, tensor)) < 1, row_id
        assert abs(bar.get("quantization constants", 0) * 2**20 - found.quantization_bytes) < 1, row_id
        assert abs(bar["weights"] * 2**20 - (found.weights_bytes - found.quantization_bytes)) < 1, row_id
        assert ("quantization constants" in bar) == bool(result.row.quantization), row_id
