"""fit: the answer fits, the next batch does not, both checked by simulating them again."""

from pathlib import Path

import pytest
from conftest import TINY_MODEL, run_cli

from generator.budget import ProcessModel
from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict.fit import Predictor, fit
from generator.predict.simulate import simulate
from generator.store.fit_table import FitTable, Simulated, load_fit, save_fit
from generator.store.records import ResultsError

MIB = 2**20
OVERHEAD = ProcessModel(proportional=0.08, fixed=40 * MIB, rows=3, source="a test's")


def test_the_answer_fits_and_the_next_batch_does_not() -> None:
    source = resolve_model(str(TINY_MODEL))
    answers = fit(Predictor(source, OVERHEAD), seq_len=64, budget=120 * MIB, margin=0.1)
    usable = round(120 * MIB * 0.9)
    assert [answer.kind for answer in answers] == ["inference", "full training", "gradient checkpointing",
                                                   "16-bit training", "LoRA"]
    for answer in answers:
        assert answer.batch >= 1, answer
        again = OVERHEAD.expected(simulate(parse_row(answer.row), source).tensor_peak_bytes)
        following = parse_row(answer.row.replace(f"-b{answer.batch}-", f"-b{answer.batch + 1}-"))
        assert again == answer.predicted_bytes <= usable < OVERHEAD.expected(
            simulate(following, source).tensor_peak_bytes) == answer.next_bytes


def test_nothing_fits_a_budget_below_the_weights() -> None:
    (answer,) = fit(Predictor(resolve_model(None), OVERHEAD), 64, 100 * MIB, kinds=("full training",))
    assert answer.batch == 0 and answer.predicted_bytes > 90 * MIB and answer.row == "train-b1-s64"


def test_the_command_line(tmp_path: Path) -> None:
    result = run_cli("fit", "--budget", "150MiB", "--model", str(TINY_MODEL), "--seq", "64",
                     "--measurements", str(tmp_path))
    assert result.returncode == 0, result.stderr
    assert "tiny-llama in 150 MiB, 10% kept free" in result.stdout and "full training: batch" in result.stdout
    refused = run_cli("fit", "--model", str(TINY_MODEL))
    assert refused.returncode == 2 and "fit needs --budget" in refused.stderr


def test_the_site_table_round_trips_and_refuses_what_it_does_not_know(tmp_path: Path) -> None:
    table = FitTable(environment="cpu-x", seq_len=1024, margin=0.1, process_model="words", answers=(),
                     example=(Simulated(model="m", task="run it", row="infer-b1-s512-bf16", tensor_peak_bytes=1,
                                        peak_bytes=2),))
    path = save_fit(table, tmp_path)
    assert load_fit(tmp_path) == table
    path.write_text(path.read_text().replace("schema_version = 1", "schema_version = 9"))
    with pytest.raises(ResultsError, match="schema version 9"):
        load_fit(tmp_path)
