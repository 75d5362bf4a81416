"""Fast, exact tests of what `refresh` decides and how the site's curves are sampled (generator/predict/
refresh.py, generator/predict/curves.py), and of the allocator settings a worker starts with (generator/measure/
allocator.py). The simulator, the probe and the measurement are replaced by stand-ins with figures chosen by
hand, so each decision is checked in milliseconds and `nox -s mutation` can run these against every bug it
plants."""

from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from test_mutation_figures import ENV, _row

from generator.answers.fit import search_text
from generator.answers.published import qlora_ppm
from generator.cli import refresh
from generator.matrix import parse_row
from generator.measure import allocator
from generator.measure.allocator import AllocatorError
from generator.predict import curves
from generator.predict.simulate import METHOD
from generator.store.codec import load_file, save
from generator.store.fit_table import Curve, FitTable, Simulated
from generator.store.records import ResultsError

GIB = 2**30
MIB = 2**20
SOURCE = SimpleNamespace(name="Tiny", config_sha256="c0ffee")


def _simulator(peaks: dict[int, int], asked: list[str]):
    """curves.simulated's stand-in: tensor peak peaks[batch], a CUDA reserve 1,000 bytes above, 7 parameters."""
    def simulated(row_id, source):
        assert source is SOURCE
        row = parse_row(row_id)
        asked.append(row.id)
        if row.batch_size not in peaks:
            return None, "cannot"
        peak = peaks[row.batch_size]
        cpu = SimpleNamespace(tensor_peak_bytes=peak, parameters=7 + row.batch_size)
        return curves.Point(cpu, SimpleNamespace(cuda_reserved_bytes=peak + 1000)), ""  # type: ignore[arg-type]
    return simulated


def test_a_curve_doubles_the_batch_until_its_peak_passes_the_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    peaks = {1: 10 * GIB, 2: 100 * GIB, 4: 128 * GIB, 8: 128 * GIB + 1, 16: 300 * GIB}
    monkeypatch.setattr(curves, "simulated", _simulator(peaks, asked))
    found = curves.curve(SOURCE, "ignored", 1024, row="train-b{b}-s{s}-ckpt")  # type: ignore[arg-type]
    assert asked == ["train-b1-s1024-ckpt", "train-b2-s1024-ckpt", "train-b4-s1024-ckpt", "train-b8-s1024-ckpt"]
    assert found == Curve(model="Tiny", config_sha256="c0ffee", parameters=15, setup="ignored",
                          row="train-b{b}-s1024-ckpt", batches=(1, 2, 4, 8),
                          tensor_bytes=(10 * GIB, 100 * GIB, 128 * GIB, 128 * GIB + 1),
                          cuda_bytes=(10 * GIB + 1000, 100 * GIB + 1000, 128 * GIB + 1000, 128 * GIB + 1001))


def test_a_curve_needs_two_points_and_stops_at_the_batch_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[str] = []
    monkeypatch.setattr(curves, "simulated", _simulator({1: 200 * GIB, 2: 300 * GIB}, asked))
    found = curves.curve(SOURCE, "gen", 256)  # type: ignore[arg-type]
    assert asked == ["gen-b1-s256-n32-bf16", "gen-b2-s256-n32-bf16"] and found is not None
    assert found.batches == (1, 2) and found.row == "gen-b{b}-s256-n32-bf16" and found.setup == "gen"
    asked.clear()
    every = {batch: batch for batch in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)}
    monkeypatch.setattr(curves, "simulated", _simulator(every, asked))
    assert curves.curve(SOURCE, "gen", 8192).batches == (1, 2, 4, 8, 16, 32, 64, 128)  # type: ignore[arg-type,union-attr]
    assert curves.curve(SOURCE, "gen", 256).batches[-1] == 1024  # type: ignore[arg-type,union-attr]


def test_a_curve_that_cannot_be_simulated_or_has_one_point_is_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(curves, "simulated", _simulator({1: 5, 2: 6}, []))
    assert curves.curve(SOURCE, "gen", 256, row="gen-b{b}-s{s}-n32-bf16") is None  # type: ignore[arg-type]
    monkeypatch.setattr(curves, "simulated", _simulator({1: 5}, []))
    assert curves.curve(SOURCE, "gen", 256) is None  # type: ignore[arg-type]
    monkeypatch.setattr(curves, "batch_limit", lambda seq_len: 1)
    monkeypatch.setattr(curves, "simulated", _simulator({1: 5, 2: 6}, []))
    assert curves.curve(SOURCE, "gen", 256) is None  # type: ignore[arg-type]


def test_the_example_and_the_site_curves_are_put_together_as_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(curves, "resolve_model", lambda name: SimpleNamespace(name=name, config_sha256=name))
    monkeypatch.setattr(curves, "simulate_kept", lambda row, source: SimpleNamespace(
        tensor_peak_bytes=row.batch_size * 10, cuda_reserved_bytes=row.batch_size * 11 + len(source.name)))
    assert curves.example_row("run it", "gen-b8-s2048-n32-bf16") == Simulated(
        model="Llama-2-7b", task="run it", row="gen-b8-s2048-n32-bf16", tensor_peak_bytes=80,
        cuda_reserved_bytes=88 + len("Llama-2-7b"))
    asked: list[tuple] = []
    monkeypatch.setattr(curves, "SHIPPED_MODELS", ("a", "b"))
    monkeypatch.setattr(curves, "resolve_model", lambda name: SimpleNamespace(  # b's positions stop at 512
        name=name, config_sha256=name, max_positions=512 if name == "b" else 0))
    monkeypatch.setattr(curves, "sharded_model", lambda: SimpleNamespace(name="big"))
    monkeypatch.setattr(curves, "curve", lambda source, kind, seq_len, row="", edges=(): asked.append(
        (source.name, kind, seq_len, row, edges)) or (None if kind == "qlora" else SimpleNamespace(
            kind=kind, seq_len=seq_len, name=source.name)))
    monkeypatch.setattr(curves, "example_row", lambda task, row: (task, row))
    clock = iter([100.0, 112.345])
    monkeypatch.setattr(curves.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(curves.parallel, "starmap", lambda function, tasks, workers: [
        function(*t) for t in tasks] if workers == 3 else pytest.fail(f"workers {workers}"))
    monkeypatch.setattr(curves, "calculator_edges", lambda process=None, cards=(), qlora_ppm=0: ("edges at", cards))
    table = curves.site_curves(ENV, 3, (8, 24), (512, 1024))  # type: ignore[arg-type]
    assert table.seconds == 12.3
    kinds = list(curves.BY_ID)
    wanted = [(name, n) for n in (512, 1024) for name in ("a", "b") if (name, n) != ("b", 1024)]
    plain = [(name, kind, n, "", ("edges at", (8, 24))) for name, n in wanted for kind in kinds]
    assert asked[:len(plain)] == plain
    assert asked[len(plain):] == [("big", kind, 1024, row, ("edges at", (curves.SHARDED_CARD_GIB,)))
                                  for kind, row in curves.SHARDED_SETUPS]
    assert table.cards == (8, 24)  # the table says which cards' batches it holds: is_current reads it
    made = [(name, kind, n) for name, n in wanted for kind in kinds if kind != "qlora"]
    assert [(c.name, c.kind, c.seq_len) for c in table.curves] == [m for m in made if m[2] == 1024]  # type: ignore
    assert [(c.name, c.kind, c.seq_len) for c in table.other_lengths] == [m for m in made if m[2] == 512]  # type: ignore
    assert [c.kind for c in table.sharded] == [kind for kind, _ in curves.SHARDED_SETUPS if kind != "qlora"]  # type: ignore
    monkeypatch.setattr(curves.parallel, "starmap", lambda function, tasks, workers: [function(*t) for t in tasks])
    monkeypatch.setattr(curves.time, "perf_counter", lambda: 0.0)
    asked.clear()
    assert curves.site_curves(ENV).seq_len == 1024 and {a[2] for a in asked} == {1024}  # the page's length alone
    assert table.example == curves.EXAMPLE_ROWS
    assert (table.libraries, table.environment, table.seq_len, table.simulator) == (
        "torch 2.13, transformers 5.24, peft 0.21", "cpu-x", 1024, METHOD)


def test_a_recorded_curve_pins_each_card_so_the_chord_answers_as_fit_does(monkeypatch: pytest.MonkeyPatch) -> None:
    """A convex reserve curve, a card's usable budget between doubled batches: the curve gains the answer and
    the batch after it, so the chord's largest batch at each card is the one fit's search finds on the real
    peaks, while a chord of the doubled batches alone answers less at some card."""
    from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
    from generator.answers.fit import largest_batch
    from generator.budget import ProcessModel
    from generator.matrix import batch_limit

    real = {b: 3 * GIB + b * 40 * 2**20 + b * b * 2**16 for b in range(1, 2049)}  # reserve = peak + 1,000
    monkeypatch.setattr(curves, "simulated", _simulator(real, []))
    edges = curves.calculator_edges(ProcessModel(0.0, 0.0, 0, ""))
    plain = curves.curve(SOURCE, "infer", 256)  # type: ignore[arg-type]
    pinned = curves.curve(SOURCE, "infer", 256, edges=edges)  # type: ignore[arg-type]
    assert plain is not None and pinned is not None and set(plain.batches) < set(pinned.batches)
    lost, limit = 0, batch_limit(256)
    for edge in edges:
        def needs(b: int) -> int:
            return real[b] + 1000 + CUDA_CONTEXT_BYTES
        fit_answer = largest_batch(needs, edge.usable, limit)
        assert largest_batch(lambda b: pinned.cuda_at(b) + CUDA_CONTEXT_BYTES, edge.usable, limit) == fit_answer
        assert {fit_answer, fit_answer + 1} <= set(pinned.batches)
        lost += largest_batch(lambda b: plain.cuda_at(b) + CUDA_CONTEXT_BYTES, edge.usable, limit) < fit_answer
    assert lost > 0


def _table(libraries: str = "torch 2.13, transformers 5.24, peft 0.21", simulator: str = METHOD,
           configs: tuple[str, ...] = ("a", "b"), lengths: tuple[int, ...] = curves.CALCULATOR_LENGTHS) -> FitTable:
    made = tuple(Curve(model=c, config_sha256=c, parameters=1, setup="k", row=f"infer-b{{b}}-s{n}", batches=(1, 2),
                       tensor_bytes=(1, 2)) for c in configs for n in lengths)
    return FitTable(libraries=libraries, environment="cpu-x", seq_len=1024,
                    curves=tuple(c for c in made if c.seq_len == 1024), example=(), simulator=simulator,
                    other_lengths=tuple(c for c in made if c.seq_len != 1024), cards=curves.PAGE_CARDS,
                    search=search_text(qlora_ppm(Path("no-measurements-here"), "gpu")),  # the shipped suite's
                    setups=tuple(curves.BY_ID))



def test_the_curves_step_simulates_only_what_is_not_current(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(curves, "SHIPPED_MODELS", ("a", "b"))
    monkeypatch.setattr(curves, "resolve_model", lambda name: SimpleNamespace(config_sha256=name))
    saved: list[tuple] = []
    monkeypatch.setattr(refresh.curves, "site_curves", lambda environment, workers, qlora_ppm: SimpleNamespace(
        made=("new", environment.id, workers), libraries="", simulator="", search=""))
    monkeypatch.setattr(refresh, "default_workers", lambda: 3)
    monkeypatch.setattr(refresh.fit_table, "save_fit", lambda table, folder: saved.append((table, folder)) or
                        folder / "_fit.toml")
    for found, current in ((_table(), True), (_table(simulator="old"), False), (_table(configs=("a",)), False),
                           (_table(libraries="torch 2.12"), False), (_table(lengths=(1024,)), True), (None, False),
                           (replace(_table(), cards=()), False), (replace(_table(), setups=("infer",)), False)):
        monkeypatch.setattr(refresh.fit_table, "find_fit", lambda root, environment, found=found: found
                            if (root, environment) == (tmp_path, ENV) else pytest.fail("find_fit's arguments"))
        saved.clear()
        note = refresh._curves(tmp_path, ENV)
        if current:
            assert note == "fit curves: current for these library versions" and saved == []
        else:
            assert note == f"fit curves: simulated into {tmp_path / 'cpu-x' / '_fit.toml'}"
            made = SimpleNamespace(made=("new", "cpu-x", 3), libraries="", simulator="", search="")
            assert saved == [(made, tmp_path / "cpu-x")]

    def damaged(root: Path, environment: object) -> None:
        raise ResultsError("an older release's table")

    monkeypatch.setattr(refresh.fit_table, "find_fit", damaged)
    assert refresh._curves(tmp_path, ENV).startswith("fit curves: simulated into")


def test_the_probe_runs_once_and_says_why_it_did_not(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain = _row("train-b8-s256", 100)
    capped = _row("train-b8-s256-cap2048MiB", 100)
    assert refresh.probe_step2((plain, capped), SOURCE, tmp_path, 256) == (  # type: ignore[arg-type]
        "probe: train-b8-s256 already ran under a cap")
    other = _row("train-b8-s512-cap2048MiB", 100)
    requests: list = []

    def refused(row, measurements, device, limit, source):
        assert row == parse_row("train-b8-s256")
        raise ResultsError("no uncapped run of train-b8-s256")

    monkeypatch.setattr(refresh, "plan_probe", refused)
    assert refresh.probe_step2((plain, other), SOURCE, tmp_path, 256) == (  # type: ignore[arg-type]
        "probe: not run (no uncapped run of train-b8-s256)")
    def planned(row, measurements, device, limit, source):
        assert (row, measurements, device, limit, source) == (parse_row("train-b8-s256"), tmp_path, "cpu", None, SOURCE)
        return SimpleNamespace(row=row.with_limit(3 * 2**30))

    monkeypatch.setattr(refresh, "plan_probe", planned)
    monkeypatch.setattr(refresh, "measure_rows", lambda request: requests.append(request) or SimpleNamespace(
        written=["one", "two"]))
    monkeypatch.setattr(refresh, "describe_outcome", lambda result: f"ran {result}")
    assert refresh.probe_step2((plain,), SOURCE, tmp_path, 256) == "ran one; ran two"  # type: ignore[arg-type]
    (request,) = requests
    assert (request.rows, request.model, request.output, request.repeats, request.repeats_explicit, request.force) == (
        (parse_row("train-b8-s256-cap3072MiB"),), SOURCE, tmp_path, 1, True, True)
    monkeypatch.setattr(refresh, "measure_rows", lambda request: SimpleNamespace(written=[]))
    assert refresh.probe_step2((plain,), SOURCE, tmp_path, 256) == "probe: interrupted"  # type: ignore[arg-type]


def test_predictions_are_recorded_for_finished_rows_without_one_of_this_simulator(
        monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    asked: list = []
    monkeypatch.setattr(refresh.rows, "predict_rows", lambda missing, source, model, workers: asked.append(
        (missing, source, model, workers)) or ["p"] * len(missing))
    monkeypatch.setattr(refresh.rows, "record", lambda predictions, source, measurements: predictions[:1]
                        if (source, measurements) == (SOURCE, tmp_path) else pytest.fail("record's arguments"))
    older = _row("train-b1-s256", 100, prediction=90)  # predicted by the method "fake"
    current = replace(older, prediction=replace(older.prediction, method=METHOD))
    none = _row("train-b2-s256", 100)
    failed = _row("train-b4-s256", 100, status="oom")
    capped = _row("train-b8-s256-cap2048MiB", 100)
    assert refresh.record_predictions((current, failed, capped), SOURCE, tmp_path) == (  # type: ignore[arg-type]
        "predictions: every finished row has one of this simulator")
    assert asked == []
    assert refresh.record_predictions((current, none, older, failed), SOURCE, tmp_path) == (  # type: ignore[arg-type]
        "predictions: recorded 1 of 2")
    (missing, source, model, workers), = asked
    assert missing == (none.row, older.row) and source is SOURCE and workers == refresh.default_workers()
    assert (model.proportional, model.fixed, model.rows, model.source) == (0.0, 0.0, 0, "")


def test_refresh_runs_its_steps_in_order_and_records_their_times(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(refresh, "collect_environment", lambda: ENV)
    monkeypatch.setattr(refresh, "_measured", lambda folder: ())
    report = refresh.refresh(SOURCE, tmp_path, 256)  # type: ignore[arg-type]
    assert report.notes == ["nothing measured for Tiny in cpu-x: run `memory-budget measure`"]
    assert report.seconds == {} and capsys.readouterr().err == f"refresh: {report.notes[0]}\n"
    ran: list[tuple] = []
    logged: list = []
    mine = tmp_path / "cpu-x" / "Tiny"  # the folder already holds this config's rows: it is the model's folder
    theirs = _row("infer-b1-s256", 100)
    save(replace(theirs, model=replace(theirs.model, name="Tiny", config_sha256="c0ffee")), mine)
    monkeypatch.setattr(refresh, "_measured", lambda folder: ("a row",) if folder == mine else pytest.fail(folder))
    monkeypatch.setattr(refresh, "record_predictions", lambda *args: ran.append(("predict", *args)) or "predicted")
    monkeypatch.setattr(refresh, "probe_step2", lambda *args: ran.append(("probe", *args)) or "probed")
    monkeypatch.setattr(refresh, "_curves", lambda *args: ran.append(("fit", *args)) or "fitted")
    monkeypatch.setattr(refresh.runlog, "record_run", lambda folder, entry: logged.append((folder, entry)))
    clock = iter([10.0, 11.26, 20.0, 20.04, 30.0, 32.0])
    monkeypatch.setattr(refresh.time, "perf_counter", lambda: next(clock))
    monkeypatch.setattr(refresh, "utc_now", lambda: "2026-12-02T00:00:00Z")
    report = refresh.refresh(SOURCE, tmp_path, 512)  # type: ignore[arg-type]
    assert ran == [("predict", ("a row",), SOURCE, tmp_path), ("probe", ("a row",), SOURCE, tmp_path, 512),
                   ("fit", tmp_path, ENV)]
    assert report.notes == ["predicted", "probed", "fitted"]
    assert report.seconds == {"predict": 1.3, "probe": 0.0, "fit": 2.0}
    assert capsys.readouterr().err == "refresh: predicted (1 s)\nrefresh: probed (0 s)\nrefresh: fitted (2 s)\n"
    assert logged == [(mine, {"started_at": "2026-12-02T00:00:00Z", "refresh_seconds": report.seconds})]


# ---------------------------------------------------------------- the allocator a worker starts with


def test_each_allocators_environment_by_hand(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    base = {"PATH": "/bin", "LD_PRELOAD": "old.so", "MALLOC_MMAP_THRESHOLD_": "1", "MALLOC_TRIM_THRESHOLD_": "2"}
    assert allocator.allocator_environment("glibc", base) == {"PATH": "/bin"}
    assert allocator.allocator_environment("glibc-tuned", base) == {
        "PATH": "/bin", "MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}
    monkeypatch.setattr(allocator, "LIBRARY_FOLDERS", (str(tmp_path / "none"), str(tmp_path)))
    with pytest.raises(AllocatorError) as missing:
        allocator.allocator_environment("jemalloc", base)
    assert str(missing.value) == (f"jemalloc is not installed: apt install libjemalloc2 (looked for "
                                  f"libjemalloc.so.2 in {tmp_path / 'none'}, {tmp_path})")
    (tmp_path / "libtcmalloc_minimal.so.4").touch()
    assert allocator.library_path("tcmalloc") == tmp_path / "libtcmalloc_minimal.so.4"
    assert allocator.library_path("jemalloc") is None
    assert allocator.allocator_environment("tcmalloc", base) == {
        "PATH": "/bin", "LD_PRELOAD": str(tmp_path / "libtcmalloc_minimal.so.4")}
    with pytest.raises(AllocatorError, match=r"^unknown allocator 'mimalloc' \(known: glibc, glibc-tuned, "
                                             r"jemalloc, tcmalloc\)$"):
        allocator.check_available(["glibc", "mimalloc"])
    with pytest.raises(AllocatorError, match=r"^jemalloc is not installed"):
        allocator.check_available(["tcmalloc", "jemalloc"])
    allocator.check_available(["glibc", "glibc-tuned", "tcmalloc"])
    monkeypatch.setenv("PATH", "/usr/bin")
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    assert allocator.allocator_environment("glibc")["PATH"] == "/usr/bin"


@pytest.mark.parametrize(("settings", "row", "fine"), [
    ({}, "glibc", True), ({"LD_PRELOAD": "/x/libjemalloc.so.2"}, "glibc", False),
    ({"MALLOC_MMAP_THRESHOLD_": "131072", "MALLOC_TRIM_THRESHOLD_": "131072"}, "glibc-tuned", True),
    ({}, "glibc-tuned", False), ({"MALLOC_TRIM_THRESHOLD_": "131072"}, "glibc-tuned", False),
    ({"LD_PRELOAD": "/x/libjemalloc.so.2"}, "jemalloc", True),
    ({"LD_PRELOAD": "/x/libjemalloc.so.2"}, "tcmalloc", False),
    ({"LD_PRELOAD": "/x/libtcmalloc_minimal.so.4"}, "tcmalloc", True), ({}, "tcmalloc", False),
])
def test_a_worker_checks_it_runs_under_its_rows_allocator(monkeypatch: pytest.MonkeyPatch, settings: dict, row: str,
                                                          fine: bool) -> None:
    for key in ("LD_PRELOAD", "MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_"):
        monkeypatch.delenv(key, raising=False)
    for key, value in settings.items():
        monkeypatch.setenv(key, value)
    shown = " ".join(f"{key}={settings[key]}" for key in ("LD_PRELOAD", "MALLOC_MMAP_THRESHOLD_",
                                                           "MALLOC_TRIM_THRESHOLD_") if key in settings)
    assert allocator.settings_in_effect() == shown
    if fine:
        assert allocator.check_in_effect(row) == shown
    else:
        with pytest.raises(AllocatorError) as wrong:
            allocator.check_in_effect(row)
        assert str(wrong.value) == f"the worker runs with {shown or 'no allocator settings'}, not those of {row}"


# ---------------------------------------------------------------- the fit table on disk


def test_the_fit_table_round_trips_and_each_damage_is_named(tmp_path: Path) -> None:
    import tomli_w

    from generator.store.fit_table import FIT_FILE, FIT_SCHEMA_VERSION, load_fit, save_fit

    curve = Curve(model="m", config_sha256="c", parameters=7, setup="k", row="train-b{b}-s512", batches=(1, 2),
                  tensor_bytes=(10, 20), cuda_bytes=(11, 22))
    table = FitTable(libraries="torch 2.13", environment="cpu-x", seq_len=512, curves=(curve,),
                     example=(Simulated(model="m", task="run it", row="gen-b1-s512-n32-bf16", tensor_peak_bytes=5,
                                        cuda_reserved_bytes=6),), seconds=12.5, simulator="sim 3",
                     sharded=(replace(curve, setup="sharded"),), search="search 2")
    assert save_fit(table, tmp_path) == tmp_path / FIT_FILE and load_fit(tmp_path) == table
    assert load_fit(tmp_path / "none") is None
    path = tmp_path / FIT_FILE

    def written(**document: object) -> None:
        path.write_text(tomli_w.dumps({"schema_version": FIT_SCHEMA_VERSION, "libraries": "torch 2.13",
                                       "environment": "cpu-x", "seq_len": 512, **document}), encoding="utf-8")

    written()
    assert load_fit(tmp_path) == FitTable(libraries="torch 2.13", environment="cpu-x", seq_len=512, curves=(),
                                          example=(), seconds=0.0, simulator="", sharded=())
    written(seconds=3)
    assert load_fit(tmp_path).seconds == 3.0  # type: ignore[union-attr]
    for damage, reason in [({"simulator": 3}, "simulator, search or bitsandbytes is not text"),
                           ({"search": ["x"]}, "simulator, search or bitsandbytes is not text"),
                           ({"seq_len": "512"}, "libraries, environment or seq_len is missing or mistyped"),
                           ({"environment": 1}, "libraries, environment or seq_len is missing or mistyped"),
                           ({"libraries": 1}, "libraries, environment or seq_len is missing or mistyped"),
                           ({"curves": [{"batches": [1], "tensor_bytes": [1], "cuda_bytes": [1]}]},
                            "missing 5 required positional arguments"),
                           ({"sharded": ["x"]}, "an entry is not a table"),
                           ({"example": [{"model": 1}]}, "model = 1 is not of the expected type"),
                           ({"curves": [{**asdict_curve(curve), "batches": [1]}]}, "a curve needs two batches"),
                           ({"sharded": [{**asdict_curve(curve), "cuda_bytes": [1]}]}, "a curve needs two batches"),
                           ({"schema_version": 2}, "holds curves of an older release (no simulated GPU reserve, "
                                                   "fewer set-ups); run `memory-budget refresh` to simulate them "
                                                   "again"),
                           ({"schema_version": 99}, f"schema version 99 is newer than this tool reads "
                                                    f"({FIT_SCHEMA_VERSION}); use the memory-budget release")]:
        written(**damage)
        with pytest.raises(ResultsError) as refused:
            load_fit(tmp_path)
        assert str(refused.value).startswith(f"{path}: ") and reason in str(refused.value), (damage, refused.value)


def asdict_curve(curve: Curve) -> dict:
    from dataclasses import asdict

    return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(curve).items()}


def test_the_sharded_curves_are_the_70b_configs() -> None:
    source = curves.sharded_model()
    assert source.name == "Llama-3.1-70B" and source.config_sha256


# ---------------------------------------------------------------- the fit page without curves, band or baseline


def test_a_fit_page_without_curves_a_band_or_a_baseline_says_so() -> None:
    from generator.budget import ProcessModel
    from generator.report.fit_page import build_fit_page

    rows = [_row("train-b8-s256", 5000, prediction=4000)]
    page = build_fit_page(None, rows, ProcessModel(0.1, 1000.0, 3, "three rows"), "cpu-x", "torch 2.13")
    assert page.missing == ("No simulated curves under torch 2.13 yet: `memory-budget refresh` (part of "
                            "`nox -s measure`) records them.")
    assert (page.seq_len_text, page.simulated_in, page.calculator, page.models, page.imports) == ("", "", None, (), "")
    assert page.cpu_margin_text == "10 % (no band validated: one model measured)" and not page.imports_within_margin
    assert [(b.label, b.n_bytes, b.margin) for b in page.budgets if b.target == "cpu"] == [
        ("32 GiB CPU", 32 * 2**30, 0.1), ("64 GiB CPU", 64 * 2**30, 0.1)]
    tuned = _row("baseline-jemalloc", 0)
    tuned = replace(tuned, summary=replace(tuned.summary, baseline_bytes=900 * MIB))
    failed = _row("baseline", 0, status="error")
    plain = _row("baseline", 0)
    plain = replace(plain, summary=replace(plain.summary, baseline_bytes=267 * MIB))
    page = build_fit_page(None, [*rows, tuned, failed, plain], ProcessModel(0.1, 1000.0, 3, ""), "cpu-x", "t")
    assert (page.imports, page.imports_within_margin) == ("267 MiB", True)
    big = replace(plain, summary=replace(plain.summary, baseline_bytes=4 * 2**30))
    page = build_fit_page(None, [*rows, big], ProcessModel(0.1, 1000.0, 3, ""), "cpu-x", "t")
    assert (page.imports, page.imports_within_margin) == ("4,096 MiB", False)  # over 10 % of the 32 GiB machine


def test_accuracy_counts_at_its_bounds() -> None:
    from generator.answers.accuracy import Accuracy, Judged

    def judged(measured: int, out: int) -> Judged:
        return Judged("m", "r", "glibc", 1, measured, measured, measured, measured, out)

    found = Accuracy("glibc", (judged(100, 125), judged(100, 126), judged(100, 0)), margin=0.5)
    assert found.within(0.25) == 1 and found.within(0.26) == 2  # |error| 0.25 exactly counts as within
    assert Accuracy("glibc", (judged(100, 50), judged(101, 50)), 0.5).exceeded(0.5) == 1  # 100 = 50 / 0.5: not over


def test_the_calculators_curve_without_a_recipe_says_none() -> None:
    import json

    from generator.budget import ProcessModel
    from generator.report.calculator import calculator_data

    curve = Curve(model="m", config_sha256="c", parameters=1, setup="a kind of its own", row="train-b{b}-s512",
                  batches=(1, 2), tensor_bytes=(1, 2), cuda_bytes=(3, 4))
    table = FitTable(libraries="t", environment="e", seq_len=512, curves=(curve,), example=())
    data = calculator_data(table, (), ProcessModel(0.1, 5.0, 3, ""), {"gpu": 0.1}, (8,), 8)
    (found,) = json.loads(data.text)["curves"]
    assert found["recipe"] == "" and found["cuda"] == ["3", "4"]


def test_the_fit_table_of_these_libraries_is_found_this_environments_first(tmp_path: Path) -> None:
    from generator.store.fit_table import find_fit, save_fit

    mine, other, older = replace(ENV, id="cpu-b"), replace(ENV, id="cpu-a"), replace(ENV, id="cpu-0", torch="2.12")
    for environment, seconds in ((mine, 1.0), (other, 2.0), (older, 3.0)):
        save_fit(FitTable(libraries=f"torch {environment.torch}, transformers 5.24, peft 0.21",
                          environment=environment.id, seq_len=512, curves=(), example=(), seconds=seconds),
                 tmp_path / environment.id)
    assert find_fit(tmp_path, mine).seconds == 1.0  # type: ignore[union-attr]  # its own, though cpu-a sorts first
    assert find_fit(tmp_path, replace(ENV, id="cpu-z")).seconds == 2.0  # type: ignore[union-attr]
    assert find_fit(tmp_path, replace(ENV, id="cpu-z", torch="2.12")).seconds == 3.0  # type: ignore[union-attr]
    assert find_fit(tmp_path, replace(ENV, id="cpu-z", torch="2.11")) is None


def test_a_list_where_the_fit_table_wants_text_is_refused(tmp_path: Path) -> None:
    import tomli_w

    from generator.store.fit_table import FIT_FILE, FIT_SCHEMA_VERSION, load_fit

    curve = {"model": "m", "config_sha256": "c", "parameters": 1, "setup": ["k"], "row": "r", "batches": [1, 2],
             "tensor_bytes": [1, 2], "cuda_bytes": [1, 2]}
    (tmp_path / FIT_FILE).write_text(tomli_w.dumps({"schema_version": FIT_SCHEMA_VERSION, "libraries": "t",
                                                    "environment": "e", "seq_len": 1, "curves": [curve]}))
    with pytest.raises(ResultsError, match=r"setup = \['k'\] is not of the expected type"):
        load_fit(tmp_path)


def test_what_refresh_reads_and_probes_at_the_length_asked(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    row = _row("train-b8-s256", 100)
    save(row, tmp_path)
    assert refresh._measured(tmp_path) == (load_file(tmp_path / "train-b8-s256.toml"),)
    (tmp_path / "infer-b8-s256.toml").write_text("damaged = [", encoding="utf-8")
    assert refresh._measured(tmp_path) == ()
    asked: list = []
    monkeypatch.setattr(refresh, "plan_probe", lambda row, *rest: asked.append(row) or (_ for _ in ()).throw(
        ResultsError("no")))
    refresh.probe_step2((), SOURCE, tmp_path, 512)  # type: ignore[arg-type]
    assert asked == [parse_row("train-b8-s512")]


def test_a_judged_row_with_one_repeat_shows_no_range() -> None:
    from generator.answers.accuracy import Judged
    from generator.report.fit_page import judged_view

    one = judged_view(Judged("m", "r", "glibc", 90 * MIB, 100 * MIB, 100 * MIB, 100 * MIB, 110 * MIB, 0))
    assert (one.measured, one.out_of_sample) == ("100 MiB", "–")
    spread = judged_view(Judged("m", "r", "glibc", 90 * MIB, 100 * MIB, 99 * MIB, 101 * MIB, 110 * MIB, 0))
    assert spread.measured == "100 MiB (99–101)"


def test_an_allocator_without_a_judgement_leaves_the_others() -> None:
    from generator.answers.accuracy import Accuracy, Judged
    from generator.report.fit_page import accuracy_views

    found = Accuracy("jemalloc", (Judged("m", "r", "jemalloc", 1, 100, 100, 100, 100, 0),), None)
    assert [view.allocator for view in accuracy_views({"glibc": None, "jemalloc": found})] == ["jemalloc"]
