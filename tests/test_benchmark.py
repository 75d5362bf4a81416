"""The benchmark harness (generator/predict/benchmark.py) records what it timed: a fit case timed several times
records their median, each run, and the largest peak; each run starts from an empty cache, and the question asked
again reads the first run's. The processes are stood in for: the harness's arithmetic is what is under test."""

from pathlib import Path

import pytest

from generator.predict import benchmark


def _stand_in(monkeypatch: pytest.MonkeyPatch, walls: list[float]) -> list[tuple[str, str]]:
    """_timed replaced: each first ask takes the next wall of ``walls``, an ask again 1.5 s; what was asked and
    with which cache is returned as it is asked."""
    asked: list[tuple[str, str]] = []
    pending = iter(walls)

    def timed(arguments: list[str], cache: str = "off") -> tuple[float, int]:
        again = any(cache == kept for _, kept in asked)
        asked.append(("again" if again else "first", cache))
        return (1.5, 10) if again else (next(pending), 100 * len(asked))

    monkeypatch.setattr(benchmark, "_timed", timed)
    return asked


def test_a_repeated_fit_case_records_the_median_each_run_and_the_largest_peak(monkeypatch: pytest.MonkeyPatch) -> None:
    asked = _stand_in(monkeypatch, [13.0, 9.9, 12.4, 10.2, 30.0])
    case = benchmark.run_fit_case("SmolLM2-135M-Instruct", "24GiB", "gpu", 10.0, repeat=5)
    assert case["wall_seconds"] == 12.4 and case["wall_seconds_runs"] == [13.0, 9.9, 12.4, 10.2, 30.0]
    assert case["wall_seconds_asked_again"] == 1.5 and case["peak_rss_bytes"] == 600  # the last first run's
    assert [kind for kind, _ in asked] == ["first", "again", "first", "first", "first", "first"]
    firsts = [cache for kind, cache in asked if kind == "first"]
    assert len(set(firsts)) == 5 and not any(Path(cache).exists() for cache in firsts)  # empty, then removed


def test_a_fit_case_timed_once_records_no_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    _stand_in(monkeypatch, [11.0])
    case = benchmark.run_fit_case("SmolLM2-135M-Instruct", "24GiB", "gpu", 10.0, again=False)
    assert case["wall_seconds"] == 11.0 and case["wall_seconds_asked_again"] == 0.0 and "wall_seconds_runs" not in case


def test_a_repeat_below_one_is_refused_in_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        benchmark.main(["--only", "fit", "--repeat", "0"])
    assert stopped.value.code == 2
    assert "--repeat: '0' is not a whole number of 1 or more" in capsys.readouterr().err
