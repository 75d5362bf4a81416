"""The one versioned loader (generator/store/documents.py): every file kind the store reads goes through it, with
one policy: upgrade what it knows, refuse what it does not, and name the file."""

from pathlib import Path

import pytest

from generator.store import documents
from generator.store.documents import Kind, current
from generator.store.records import ResultsError

PATH = Path("m/x.toml")


def test_one_policy_for_every_kind() -> None:
    kind = Kind("test", 3, upgrades={2: lambda d: {**d, "schema_version": 3, "added": True}},
                refused={1: "too old: run refresh"})
    assert current({"schema_version": 3, "a": 1}, PATH, kind) == {"schema_version": 3, "a": 1}
    assert current({"schema_version": 2}, PATH, kind) == {"schema_version": 3, "added": True}
    cases = [({"schema_version": 1}, "m/x.toml: too old: run refresh"),
             ({"schema_version": 4}, "m/x.toml: schema version 4 is newer than this tool reads (3); use the "
                                     "memory-budget release that wrote it"),
             ({"schema_version": 0}, "m/x.toml: schema version 0 is older than this tool reads (3)"),
             ({}, "m/x.toml: [top level] schema_version = None is missing or not a whole number"),
             ({"schema_version": True}, "m/x.toml: [top level] schema_version = True is missing or not a whole number"),
             ({"schema_version": "3"}, "m/x.toml: [top level] schema_version = '3' is missing")]
    for document, message in cases:
        with pytest.raises(ResultsError) as refused:
            current(document, PATH, kind)
        assert str(refused.value).startswith(message), refused.value
    assert current({}, PATH, Kind("log", 1, unversioned=1)) == {}


def test_each_kind_is_declared_with_its_own_version(tmp_path: Path) -> None:
    from generator.store.fit_table import FIT_SCHEMA_VERSION
    from generator.store.gpu_context import GPU_CONTEXT_SCHEMA_VERSION
    from generator.store.history import HISTORY_SCHEMA_VERSION
    from generator.store.records import SCHEMA_VERSION

    assert (documents.RESULTS.version, documents.FIT_TABLE.version, documents.HISTORY.version,
            documents.GPU_CONTEXT.version) == (SCHEMA_VERSION, FIT_SCHEMA_VERSION, HISTORY_SCHEMA_VERSION,
                                               GPU_CONTEXT_SCHEMA_VERSION)
    log = tmp_path / "_runs.toml"
    log.write_text('schema_version = 9\n[[runs]]\nseconds = 1\n', encoding="utf-8")
    from generator.store.runlog import check_runs

    with pytest.raises(ResultsError, match="schema version 9 is newer"):
        check_runs(tmp_path)
    log.write_text('[[runs]]\nseconds = 1\n', encoding="utf-8")
    check_runs(tmp_path)
    (tmp_path / "_slurm.toml").write_text('schema_version = 2\n[slurm]\npartition = "gpu"\n', encoding="utf-8")
    from generator.measure.cluster import load_options

    with pytest.raises(ResultsError, match=r"_slurm\.toml: schema version 2 is newer"):
        load_options(tmp_path, {})
    (tmp_path / "_slurm.toml").write_text('[slurm]\npartition = "gpu"\n', encoding="utf-8")
    assert load_options(tmp_path, {"time_minutes": None}).partition == "gpu"
