"""`refresh`: after `measure`, what this environment's page still needs, each step skipped when current:

1. predictions for the measured rows that have none (seconds: one simulation a row);
2. the capped step-2 row, probed from the uncapped training row (one repeat, about a minute);
3. the simulated curves of the shipped configs under these library versions (minutes, once per set of library
   versions: an environment of another machine with the same versions already serves).

It records how long each step took in the model folder's _runs.toml, beside the matrix runs."""

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from generator.answers.published import qlora_ppm
from generator.budget import ProcessModel
from generator.escaping import plain_terminal_text
from generator.matrix import parse_row
from generator.measure.environment import collect_environment
from generator.measure.matrix_run import MeasureRequest, measure_rows, utc_now
from generator.measure.probe import describe_outcome, plan_probe
from generator.model_source import ModelSource
from generator.predict import curves, rows
from generator.predict.fast.kept import METHOD
from generator.predict.parallel import default_workers
from generator.store import catalog, fit_table, runlog
from generator.store.catalog import load_folder
from generator.store.recorded_curves import stale_recorded
from generator.store.records import ResultsError, RowResult

PROBED_ROW = "train-b8"


@dataclass
class RefreshReport:
    """What refresh did, and how long each step took."""

    seconds: dict[str, float] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _measured(folder: Path) -> tuple[RowResult, ...]:
    try:
        return load_folder(folder)
    except ResultsError:
        return ()


def record_predictions(results: tuple[RowResult, ...], source: ModelSource, measurements: Path) -> str:
    """Simulate and record the finished rows that carry no prediction, or an older simulator's."""
    missing = tuple(r.row for r in results if r.finished and (r.prediction is None or r.prediction.method != METHOD))
    if not missing:
        return "predictions: every finished row has one of this simulator"
    predicted = rows.predict_rows(missing, source, ProcessModel(0.0, 0.0, 0, ""), default_workers())
    written = rows.record(predicted, source, measurements)
    return f"predictions: recorded {len(written)} of {len(missing)}"


def probe_step2(results: tuple[RowResult, ...], source: ModelSource, measurements: Path, seq_len: int) -> str:
    """Probe the training row under a cap between its step peaks, unless a capped run of it exists."""
    row = parse_row(PROBED_ROW, seq_len)
    if any(r.row.memory_limit_bytes and r.row.with_limit(0) == row for r in results):
        return f"probe: {row.id} already ran under a cap"
    try:
        plan = plan_probe(row, measurements, "cpu", None, source)
    except ResultsError as error:
        return f"probe: not run ({error})"
    report = measure_rows(MeasureRequest(rows=(plan.row,), model=source, output=measurements, repeats=1,
                                         repeats_explicit=True, force=True))
    return "; ".join(describe_outcome(result) for result in report.written) or "probe: interrupted"


def refresh(source: ModelSource, measurements: Path, seq_len: int) -> RefreshReport:
    """Every step, in order, each skipped where its result is current."""
    environment = collect_environment()
    folder = catalog.model_folder(measurements, environment.id, source.name, source.config_sha256)
    report = RefreshReport()
    results = _measured(folder)
    if not results:
        report.notes.append(f"nothing measured for {source.name} in {environment.id}: run `memory-budget measure`")
        print(plain_terminal_text(f"refresh: {report.notes[-1]}"), file=sys.stderr)
        return report
    steps = {"predict": lambda: record_predictions(results, source, measurements),
             "probe": lambda: probe_step2(results, source, measurements, seq_len),
             "fit": lambda: _curves(measurements, environment)}
    for name, step in steps.items():
        started = time.perf_counter()
        report.notes.append(step())
        report.seconds[name] = round(time.perf_counter() - started, 1)
        print(plain_terminal_text(f"refresh: {report.notes[-1]} ({report.seconds[name]:.0f} s)"), file=sys.stderr,
              flush=True)
    runlog.record_run(folder, {"started_at": utc_now(), "refresh_seconds": report.seconds})
    return report


def _curves(measurements: Path, environment) -> str:  # environment: store Environment
    try:
        table = fit_table.find_fit(measurements, environment)
        current = curves.is_current(table, environment, qlora_ppm(measurements, "gpu"))
    except ResultsError:  # a table of an older release: simulated again, over it
        table, current = None, False
    if current and table is not None:  # is_current holds only of a table
        note = "fit curves: current for these library versions"
    else:
        table = curves.site_curves(environment, workers=default_workers(), qlora_ppm=qlora_ppm(measurements, "gpu"))
        note = f"fit curves: simulated into {fit_table.save_fit(table, measurements / environment.id)}"
    return note + _stale_note(measurements / environment.id, table)


def _stale_note(folder: Path, table: fit_table.FitTable) -> str:
    """What refresh leaves to the user: the models this environment recorded (`fit --model X --record`) under
    other library versions, another simulator or another search than the table, which the page drops until they
    are recorded again (each is a user's choice of lengths and minutes, so refresh does not redo them)."""
    stale = stale_recorded(folder, table.libraries, table.simulator, table.search)
    return "".join(f"; {name}'s recorded curves are of another simulator, search or library versions, and the fit page "
                   "drops them until `fit --model ... --record` records them again" for name in stale)
