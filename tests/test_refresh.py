"""Every "current" decision of `refresh`, each with both outcomes: a prediction of an older simulator is made
again, and curves of other library versions, of an older simulator or of a changed shipped config are
simulated again; what is current is left alone."""

from dataclasses import replace
from pathlib import Path

import pytest
from test_mutation_figures import ENV, _row

from generator.answers.fit import SEARCH, search_text
from generator.answers.published import qlora_ppm
from generator.cli import refresh
from generator.model_source import SHIPPED_MODELS, resolve_model
from generator.predict import curves
from generator.predict.simulate import METHOD
from generator.store.fit_table import Curve, FitTable, libraries


def _predicted(row_id: str, method: str, **changes):
    row = _row(row_id, 10_000_000, prediction=5_000_000, **changes)
    return replace(row, prediction=replace(row.prediction, method=method))  # type: ignore[type-var]


def test_predictions_are_made_again_for_an_older_simulator_only(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[tuple] = []
    monkeypatch.setattr(refresh.rows, "predict_rows", lambda missing, *_: asked.append(missing) or [])
    monkeypatch.setattr(refresh.rows, "record", lambda *_: [])
    current = _predicted("train-b1-s256", METHOD)
    older = _predicted("train-b2-s256", "fake-tensors-1")
    unpredicted = _row("train-b4-s256", 10_000_000)
    failed = _row("train-b8-s256", 10_000_000, status="oom", phase="step2")
    capped = _row("train-b8-s256-cap1GiB", 10_000_000)
    note = refresh.record_predictions((current, older, unpredicted, failed, capped), None, Path("m"))  # type: ignore[arg-type]
    assert [row.id for row in asked[0]] == ["train-b2-s256", "train-b4-s256"]
    assert note == "predictions: recorded 0 of 2"
    asked.clear()
    assert refresh.record_predictions((current,), None, Path("m")) == (  # type: ignore[arg-type]
        "predictions: every finished row has one of this simulator")
    assert asked == []


def _table(**changes) -> FitTable:
    shipped = [resolve_model(name) for name in SHIPPED_MODELS]
    table = FitTable(libraries=libraries(ENV), environment=ENV.id, seq_len=1024, example=(), simulator=METHOD,
                     curves=tuple(Curve(model=s.name, config_sha256=s.config_sha256, parameters=1, setup="infer",
                                        row="infer-b{b}-s1024", batches=(1, 2), tensor_bytes=(1, 2),
                                        cuda_bytes=(1, 2)) for s in shipped), cards=curves.PAGE_CARDS,
                     search=SEARCH, setups=tuple(curves.BY_ID))
    return replace(table, **changes)


def test_curves_are_current_only_for_these_libraries_this_simulator_and_these_configs() -> None:
    assert curves.is_current(_table(), ENV)
    assert not curves.is_current(None, ENV)
    assert not curves.is_current(_table(libraries="torch 2.4.0, transformers 4.46.0, peft 0.13.0"), ENV)
    assert not curves.is_current(_table(), replace(ENV, transformers="5.25"))
    assert not curves.is_current(_table(simulator="fake-tensors-1"), ENV)
    assert not curves.is_current(_table(cards=()), ENV)  # no fit batches at the page's cards: simulated again
    assert not curves.is_current(_table(cards=curves.PAGE_CARDS[:-1]), ENV)  # a card added to the page since
    assert not curves.is_current(_table(setups=tuple(curves.BY_ID)[:-1]), ENV)  # a set-up added since
    assert not curves.is_current(_table(setups=()), ENV)  # a table from before it said which set-ups it holds
    assert not curves.is_current(_table(search=""), ENV)  # batches another search asked at the cards
    changed = _table()
    first = replace(changed.curves[0], config_sha256="0" * 64)  # a shipped config edited since
    assert not curves.is_current(replace(changed, curves=(first, *changed.curves[1:])), ENV)
    assert not curves.is_current(replace(changed, curves=changed.curves[1:]), ENV)  # a shipped config added


def test_the_fit_step_names_recorded_curves_the_page_now_drops(tmp_path: Path) -> None:
    """A model recorded with `fit --model X --record` under another simulator is dropped by the page, and
    refresh says so (it does not record it again: its lengths and minutes were the user's choice)."""
    from generator.store.fit_table import save_fit
    from generator.store.recorded_curves import RecordedCurves, save_recorded

    folder = tmp_path / ENV.id
    searched = search_text(qlora_ppm(tmp_path, "gpu"))  # the search refresh holds a table to, QLoRA's allowance in
    save_fit(_table(search=searched), folder)
    curve = replace(_table().curves[0], model="Mine")
    for model, simulator in (("Mine", "fake-tensors-1"), ("Current", METHOD)):
        save_recorded(RecordedCurves(model=model, config_sha256="c", libraries=libraries(ENV), environment=ENV.id,
                                     simulator=simulator, curves=(replace(curve, model=model),), search=searched),
                       folder)
    note = refresh._curves(tmp_path, ENV)
    assert note.startswith("fit curves: current") and "Mine's recorded curves are of another simulator" in note
    assert "Current" not in note
