"""Bad input: one clear line on stderr, exit status 2, no traceback, nothing overwritten."""

import json
import os
import shutil
import tomllib
from pathlib import Path

import pytest
import tomli_w
from conftest import TINY_MODEL, run_cli

NO_NETWORK = {**os.environ, "HF_ENDPOINT": "https://hub.invalid"}


def assert_refused(result, *expected: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr
    assert len(lines) == 1 and lines[0].startswith("memory-budget: error: "), result.stderr
    for text in expected:
        assert text in lines[0], lines[0]


@pytest.mark.parametrize(("args", "expected"), [
    (["--rows", "fast-b8"], "unknown row 'fast-b8'"),
    (["--rows", "train-b0"], "batch size must be between 1 and"),
    (["--rows", "train-b-3"], "unknown part"),
    (["--rows", "train-b100000"], "batch size must be between 1 and"),
    (["--rows", "train-b8-s1000000"], "sequence length must be between 1 and"),
    (["--rows", "train-b8-fp8"], "unknown dtype 'fp8'"),
    (["--rows", ","], "names no row"),
    (["--seq", "0"], "must be above zero"),
    (["--seq", "-5"], "--seq"),
    (["--repeats", "zero"], "not a whole number"),
    (["--timeout", "-1"], "positive number of seconds"),
    (["--memory-limit", "lots"], "not a size"),
    (["--device", "tpu"], "invalid choice"),
    (["--model", "missing/config.json"], "no such file"),
    (["--model", "HuggingFaceTB/SmolLM2-135M-Instruct"], "cannot reach the hub"),
])
def test_measure_refuses(tmp_path: Path, args: list[str], expected: str) -> None:
    result = run_cli("measure", "--output", str(tmp_path / "m"), *args, env=NO_NETWORK)
    assert_refused(result, expected)
    assert not (tmp_path / "m").exists()


@pytest.mark.slow  # starts processes that import torch and transformers
def test_measure_refuses_a_config_that_is_not_a_causal_lm(tmp_path: Path) -> None:
    config = tmp_path / "vit.json"
    config.write_text(json.dumps({"model_type": "vit", "hidden_size": 64}))
    assert_refused(run_cli("measure", "--model", str(config), "--output", str(tmp_path / "m")),
                   "not a causal language model")


@pytest.mark.parametrize("args", [["--lora-targets", "q_proj"], []])
@pytest.mark.slow  # starts processes that import torch and transformers
def test_predict_refuses_a_config_transformers_cannot_build(tmp_path: Path, args: list[str]) -> None:
    """A config whose fields transformers accepts but whose model it cannot build (an unknown activation): one
    line whether the LoRA targets are checked on the meta device first or the simulation builds it."""
    config = json.loads(TINY_MODEL.read_text()) | {"hidden_act": "no-such-activation"}
    path = tmp_path / "unbuildable.json"
    path.write_text(json.dumps(config))
    result = run_cli("predict", "--model", str(path), "--rows", "infer-b1-s8", *args)
    assert_refused(result, "transformers cannot build it from its config", "no-such-activation")


@pytest.mark.slow  # starts processes that import torch and transformers
def test_probe_without_a_measured_row_refuses(tmp_path: Path) -> None:
    result = run_cli("probe", "--model", str(TINY_MODEL), "--output", str(tmp_path))
    assert_refused(result, "measure it first or pass --memory-limit")


@pytest.fixture
def site(tmp_path: Path, measured_root: Path) -> Path:
    """A built site whose files must survive every refused build."""
    output = tmp_path / "site"
    assert run_cli("build", "--measurements", str(measured_root), "--output", str(output)).returncode == 0
    return output


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def _env_folder(measurements: Path) -> Path:
    """The rows' folder: measurements/<environment>/<model>/."""
    environment = next(p for p in measurements.iterdir() if p.is_dir())
    return next(p for p in environment.iterdir() if p.is_dir())


def _edit(path: Path, change) -> None:
    document = tomllib.loads(path.read_text())
    change(document)
    path.write_text(tomli_w.dumps(document))


def _malformed(m: Path) -> None:
    (_env_folder(m) / "train-b8-s256.toml").write_text("schema_version = 1\n[row\n")


def _newer(m: Path) -> None:
    _edit(_env_folder(m) / "train-b8-s256.toml", lambda d: d.update(schema_version=99))


def _older(m: Path) -> None:
    _edit(_env_folder(m) / "infer-b8-s256.toml", lambda d: d.update(schema_version=0))


def _mixed(m: Path) -> None:
    _edit(_env_folder(m) / "train-b1-s256.toml", lambda d: d["environment"].update(id="cpu-somewhere-else"))


def _empty(m: Path) -> None:
    shutil.rmtree(_env_folder(m).parent)


@pytest.mark.parametrize(("damage", "expected"), [
    (_malformed, "not valid TOML"),
    (_newer, "schema version 99 is newer than this tool reads"),
    (_older, "schema version 0 is older than this tool reads"),
    (_mixed, "mixes environments"),
    (_empty, "holds no result files"),
])
def test_build_refuses_bad_measurements_and_keeps_the_old_site(measurements_copy: Path, site: Path, damage,
                                                               expected: str) -> None:
    before = _snapshot(site)
    damage(measurements_copy)
    result = run_cli("build", "--measurements", str(measurements_copy), "--output", str(site))
    assert_refused(result, expected)
    assert _snapshot(site) == before


def test_build_refuses_an_unknown_environment(measured_root: Path, tmp_path: Path) -> None:
    result = run_cli("build", "--measurements", str(measured_root), "--env", "cpu-nowhere",
                     "--output", str(tmp_path / "site"))
    assert_refused(result, "no environment 'cpu-nowhere'")


def test_build_refuses_a_missing_measurements_folder(tmp_path: Path) -> None:
    assert_refused(run_cli("build", "--measurements", str(tmp_path / "nothing"), "--output", str(tmp_path / "s")),
                   "no such measurements folder")


def test_build_never_replaces_a_folder_that_is_not_a_site(measured_root: Path, tmp_path: Path) -> None:
    precious = tmp_path / "notes"
    precious.mkdir()
    (precious / "thesis.txt").write_text("years of work")
    result = run_cli("build", "--measurements", str(measured_root), "--output", str(precious))
    assert_refused(result, "did not write (thesis.txt)")
    assert (precious / "thesis.txt").read_text() == "years of work"
    a_file = tmp_path / "site.txt"
    a_file.write_text("keep")
    assert_refused(run_cli("build", "--measurements", str(measured_root), "--output", str(a_file)), "is a file")
    assert a_file.read_text() == "keep"


def test_unknown_subcommand_and_missing_arguments(tmp_path: Path) -> None:
    assert_refused(run_cli("forecast"), "invalid choice")
    assert_refused(run_cli(), "required")
