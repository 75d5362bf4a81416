"""Fast, exact tests of the plausibility checks (generator/store/plausible.py): each damage refused in its own
words, each bound at its edge, and what is never checked (a failed row, the baseline)."""

from dataclasses import replace
from pathlib import Path

import pytest
from test_mutation_figures import ENV, _row

from generator.store.plausible import check
from generator.store.records import Repeat, ResultsError

PATH = Path("m/e/model/train-b8-s256.toml")
GIB = 2**30


def _refused(result) -> str:
    with pytest.raises(ResultsError) as refused:
        check(result, PATH)
    return str(refused.value)


def _summary(result, **changes):
    return replace(result, summary=replace(result.summary, **changes))


def test_each_damage_in_its_own_words() -> None:
    good = _row("train-b8-s256", 1000, nets=(900, 1000, 1100), spread=(900, 1100))  # 2 GiB machine, imports 100
    check(good, PATH)
    assert _refused(_summary(good, peak_rss_bytes=2 * GIB + 1)) == (
        f"{PATH}: [result] peak_rss_bytes = {2 * GIB + 1} is above the machine's recorded memory (2,147,483,648 bytes)")
    unknown = replace(good, environment=replace(ENV, total_memory_bytes=0))
    assert "is over 2×" in _refused(_summary(unknown, peak_rss_bytes=2 * GIB + 1))  # no machine bound to pass
    assert _refused(_summary(unknown, net_peak_max_bytes=1024**5 + 1)) == (
        f"{PATH}: [result] net_peak_max_bytes = {1024**5 + 1} is above any machine's memory "
        "(1,125,899,906,842,624 bytes)")
    for field, label in (("net_peak_bytes", "[result] net_peak_bytes"), ("baseline_bytes", "[result] baseline_bytes")):
        assert _refused(_summary(good, **{field: 2 * GIB + 1})).startswith(f"{PATH}: {label} = {2 * GIB + 1} is above")
    assert _refused(_summary(good, phase_peak_bytes={"forward": 2 * GIB + 1})).startswith(
        f"{PATH}: [result] phase_peak_bytes.forward = {2 * GIB + 1} is above")
    assert _refused(replace(good, repeats=(*good.repeats, Repeat(status="ok", baseline_bytes=1,
                                                                 peak_rss_bytes=2 * GIB + 1)))).startswith(
        f"{PATH}: [repeats.3] peak_rss_bytes = {2 * GIB + 1} is above")
    check(_summary(_row("train-b8-s256", GIB), peak_rss_bytes=2 * GIB), PATH)  # the whole machine, not above it
    assert _refused(_summary(good, peak_rss_bytes=999)) == (
        f"{PATH}: [result] peak_rss_bytes = 999 is below net_peak_bytes = 1000; a process cannot hold less than "
        "its own net peak")
    check(_summary(good, peak_rss_bytes=1000, baseline_bytes=0), PATH)  # equal: possible


def test_a_summary_outside_its_repeats_or_its_range_is_refused() -> None:
    good = _row("train-b8-s256", 1000, nets=(900, 1000, 1100), spread=(900, 1100))
    assert _refused(_summary(good, net_peak_bytes=1200, peak_rss_bytes=1300)) == (
        f"{PATH}: [result] net_peak_bytes = 1200 lies outside its own range (900–1100)")
    check(_summary(good, net_peak_bytes=1100, peak_rss_bytes=1200), PATH)  # at the range's edge
    no_range = _summary(good, net_peak_min_bytes=0, net_peak_max_bytes=0)
    assert _refused(_summary(no_range, net_peak_bytes=800, peak_rss_bytes=900)) == (
        f"{PATH}: [result] net_peak_bytes = 800 lies outside its repeats (900–1100)")
    check(_summary(no_range, net_peak_bytes=900, peak_rss_bytes=1000), PATH)
    failed = replace(no_range, repeats=(*no_range.repeats, Repeat(status="oom", baseline_bytes=100,
                                                                  peak_rss_bytes=50_000)))
    check(failed, PATH)  # a failed repeat's figure is not a bound


def test_a_process_out_of_proportion_is_refused_at_twice_its_parts() -> None:
    good = _row("train-b8-s256", 1000, nets=(900, 1000, 1100), spread=(900, 1100))  # parts: 100 + 1100
    check(_summary(good, peak_rss_bytes=2400), PATH)
    assert _refused(_summary(good, peak_rss_bytes=2401)) == (
        f"{PATH}: [result] peak_rss_bytes = 2401 is over 2× the imports plus the net peak it is made of (1200); "
        "the file is damaged")
    wide = _summary(good, net_peak_max_bytes=0, net_peak_min_bytes=0)  # parts: 100 + the median, 1000
    assert _refused(_summary(wide, peak_rss_bytes=2201)).endswith("made of (1100); the file is damaged")


def test_failed_rows_and_the_baseline_are_not_checked() -> None:
    check(_summary(_row("train-b8-s256", 1000, status="oom"), peak_rss_bytes=10 * GIB), PATH)
    check(_summary(_row("baseline", 0), peak_rss_bytes=10 * GIB), PATH)
