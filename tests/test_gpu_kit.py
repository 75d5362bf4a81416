"""The GPU validation kit without a GPU: its readings parsed and checked, its refusal where CUDA is missing, and
the pages built from recorded fixture files (tests/fixtures/gpu/: the shape of a kit's environment, with made-up
figures on a device named as no measurement), with every figure set by hand against what the pages print."""

import json
import shutil
from pathlib import Path

import pytest
from conftest import run_cli

from generator.report.site import build_pages
from generator.store import gpu_context
from generator.store.records import ResultsError

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "gpu"


def test_the_context_probe_is_read_field_by_field() -> None:
    readings = json.loads((FIXTURES / "probe.json").read_text())
    context = gpu_context.from_readings(readings, "probe.json")
    assert (context.context_bytes, context.context_with_kernels_bytes) == (524_288_000, 600 * 2**20)
    for key, bad in (("context_bytes", "500 MiB"), ("total_bytes", -2), ("device_name", 3), ("torch", None)):
        with pytest.raises(ResultsError, match=key):
            gpu_context.from_readings({**readings, key: bad}, "probe.json")


@pytest.mark.slow  # builds pages from a GPU environment and starts processes
def test_the_kit_refuses_a_machine_without_cuda_in_one_line() -> None:
    result = run_cli("gpu", "--measurements", str(REPO / "measurements"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == ["memory-budget: error: gpu needs a CUDA device, and torch sees "
                                                  "none here"]


@pytest.fixture(scope="module")
def pages_with_a_gpu(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    root = tmp_path_factory.mktemp("measurements")
    shutil.copytree(REPO / "measurements", root, dirs_exist_ok=True)
    for environment in FIXTURES.glob("cuda-*"):
        shutil.copytree(environment, root / environment.name)
    return build_pages(root)


@pytest.mark.slow  # builds pages from a GPU environment and starts processes
def test_the_fit_page_sets_simulated_beside_measured_for_each_validated_row(pages_with_a_gpu) -> None:
    page = pages_with_a_gpu["fit.md"]
    # by hand: 3,060,000,000 B is 2,918 MiB, 3,000,000,000 B is 2,861 MiB, +2.0 %; 398e6 B against 420e6 B, −5.2 %
    assert "| SmolLM2-135M-Instruct | `train-b4-s512` | 2,918 MiB | 2,861 MiB | +2.0 % |" in page
    assert "| SmolLM2-135M-Instruct | `infer-b8-s256` | 380 MiB | 401 MiB | −5.2 % |" in page
    assert "| `train-b8-s256` | 23,976 MiB | ran out of memory: the answer is wrong |" in page
    assert "| `train-b4-s512` | 23,976 MiB | ran: the answer holds |" in page
    assert "Fixture GPU <not a measurement>" not in page  # a device name is data, never markup


def test_the_first_screens_say_what_a_device_confirmed(pages_with_a_gpu) -> None:
    line = ("GPU figures are simulated; 2 rows of the GPU kit were measured on Fixture GPU")
    for name in ("index.md", "fit.md"):
        assert line in pages_with_a_gpu[name], name
    fit = pages_with_a_gpu["fit.md"]
    assert "within 5 % of the measured one on 1 of them (median error 3.6 %)" in fit  # |+2.0|, |−5.2|
    assert "1 of 2 fit answers checked there ran at their batch, and 1 ran out of memory" in fit
    assert "the context measured 500 MiB, and 600 MiB with cuBLAS's kernels and workspaces loaded" in fit


@pytest.mark.slow  # builds pages from a GPU environment and starts processes
def test_without_a_gpu_environment_every_gpu_figure_is_called_simulated() -> None:
    pages = build_pages(REPO / "measurements")
    for name in ("index.md", "fit.md"):
        assert "none has been validated on a device yet" in pages[name], name
    assert "## Validated on" not in pages["fit.md"]
