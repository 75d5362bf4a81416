"""A model's recorded curves (`fit --model X --record`): stored whole, merged by length, refused when they are
not ours, and offered by a build only under its own library versions and simulator."""

from itertools import pairwise
from pathlib import Path

import pytest

from generator.budget import ProcessModel
from generator.report.calculator import calculator_data
from generator.store.fit_table import Curve, FitTable
from generator.store.recorded_curves import (
    RecordedCurves,
    find_recorded,
    load_recorded,
    merged,
    recorded_path,
    save_recorded,
)
from generator.store.records import ResultsError


def _curve(seq: int, kind: str = "inference", model: str = "Mine") -> Curve:
    return Curve(model=model, config_sha256="c", parameters=5, setup=kind, row=f"infer-b{{b}}-s{seq}",
                 batches=(1, 2, 4), tensor_bytes=(10, 20, 40), cuda_bytes=(11, 22, 44))


def _recorded(*seqs: int, sha: str = "c", simulator: str = "sim", search: str = "s1") -> RecordedCurves:
    return RecordedCurves(model="Mine", config_sha256=sha, libraries="torch 1", environment="cpu-x",
                          simulator=simulator, curves=tuple(_curve(n) for n in seqs), search=search)


def test_a_recording_keeps_the_lengths_it_did_not_simulate_and_round_trips(tmp_path: Path) -> None:
    folder = tmp_path / "cpu-x"
    save_recorded(merged(None, _recorded(256, 1024)), folder)
    path = recorded_path(folder, "Mine")
    save_recorded(merged(load_recorded(path), _recorded(512, 1024)), folder)
    assert load_recorded(path).lengths() == (256, 512, 1024)
    assert merged(load_recorded(path), _recorded(512, sha="other")).lengths() == (512,)  # another config: stale
    assert merged(load_recorded(path), _recorded(512, simulator="new")).lengths() == (512,)
    assert merged(load_recorded(path), _recorded(512, search="s2")).lengths() == (512,)  # another search's batches
    assert find_recorded(tmp_path, "torch 1", "sim", "s1") == (load_recorded(path),)
    assert find_recorded(tmp_path, "torch 2", "sim", "s1") == () == find_recorded(tmp_path, "torch 1", "old", "s1")
    assert find_recorded(tmp_path, "torch 1", "sim", "s2") == ()


@pytest.mark.parametrize("text", ["not toml [", "schema_version = 9\n", 'schema_version = 1\nmodel = "Mine"\n'])
def test_a_file_that_is_not_a_recording_is_refused_not_replaced(tmp_path: Path, text: str) -> None:
    path = recorded_path(tmp_path, "Mine")
    path.parent.mkdir(parents=True)
    path.write_text(text)
    with pytest.raises(ResultsError):
        load_recorded(path)
    assert path.read_text() == text


def test_the_calculator_offers_recorded_lengths_but_not_twice_what_the_site_holds() -> None:
    import json

    site = FitTable(libraries="torch 1", environment="e", seq_len=1024, example=(),
                    curves=(_curve(1024, model="Shipped"),), other_lengths=(_curve(256, model="Shipped"),))
    extra = RecordedCurves(model="Shipped", config_sha256="c", libraries="torch 1", environment="e", simulator="s",
                           curves=(_curve(1024, model="Shipped"), _curve(512, model="Shipped")))
    data = json.loads(calculator_data(site, (_recorded(256), extra), ProcessModel(0.0, 0.0, 0, ""), {"gpu": 0.1},
                                      (8,), 8).text)
    assert [(c["model"], c["seq"], c["limit"]) for c in data["curves"]] == [
        ("Shipped", 1024, "1024"), ("Shipped", 256, "1024"), ("Mine", 256, "1024"), ("Shipped", 512, "1024")]


@pytest.mark.parametrize("kind", ["inference", "LoRA", "gradient checkpointing"])
def test_at_every_card_a_recorded_curve_answers_as_fit_does(kind: str, tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    """`fit --model X --record`'s curve, read by the page's chord rule at each card the page lists, gives the
    batch and the reserve that `fit --target gpu`'s own simulated search gives, for a 2-layer config whose
    answers fall between the doubled batches; checkpointed, its reserve dips as the batch grows (CUDA's foreach
    AdamW), where a bracket from the doubled batches answered otherwise than fit."""
    from conftest import TESTS

    from generator.answers.fit import GPU_GROUPS_GIB, STATED_MARGIN
    from generator.answers.setups import BY_NAME
    from generator.model_source import resolve_model
    from generator.predict import curves
    from generator.predict.fit import Predictor, largest_batch
    from generator.report.fit_page import Budget, site_answers

    monkeypatch.setenv("MEMORY_BUDGET_CACHE", str(tmp_path))  # fit's search reads the recording's simulations
    source = resolve_model(str(TESTS / "calculator-llama.json"))
    process = ProcessModel(0.0, 0.0, 0, "")
    curve = curves.curve(source, BY_NAME[kind].id, 256, edges=curves.calculator_edges(process))
    assert curve is not None
    dips = [pair for pair in pairwise(curve.cuda_bytes) if pair[1] < pair[0]]
    assert bool(dips) == (kind == "gradient checkpointing")  # the case this kind is here for
    table = FitTable(libraries="", environment="", seq_len=256, curves=(curve,), example=())
    predictor = Predictor(source, process, target="gpu")
    inside = 0
    for gib in (gib for group in GPU_GROUPS_GIB for gib in group):
        ((_, page),) = site_answers(table, process, (Budget("", gib * 2**30, "gpu", STATED_MARGIN),))
        found = largest_batch(predictor, kind, 256, page.usable_bytes)
        assert (page.batch, page.predicted_bytes, page.next_bytes) == (
            found.batch, found.predicted_bytes, found.next_bytes), gib
        inside += found.batch not in (0, 1024) and found.batch & (found.batch - 1) != 0
    assert inside >= 3  # answers between the doubled batches, where a chord alone could err
