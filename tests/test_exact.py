"""The fast path against the exact simulation, end to end, on every row kind the answers are given for: a
16-layer tiny Llama (deep enough for the small depths), each set-up's row at batch 5 after batch 2 (so that the
fast path writes it from the line through two batches, each by the small depths), on the CPU's program and
CUDA's. simulate_part, the
fast path with its own FakeTensorMode, small depths, batch line and decode steps, gives the figures that
exact/parts.py's simulate_exactly gives from one run of every layer, batch and token under PyTorch's own
FakeTensorMode: every field of the part, to the byte, but the seconds it took."""

import json
from dataclasses import asdict
from pathlib import Path

import pytest
from conftest import TESTS

from generator.answers.setups import BY_ID
from generator.matrix import parse_row
from generator.model_source import resolve_model
from generator.predict.exact.parts import simulate_exactly
from generator.predict.fast.kept import METHOD
from generator.predict.simulate import simulate_part

pytestmark = pytest.mark.slow  # a run of 16 layers for every set-up and program, beside the fast path's


@pytest.fixture(scope="module")
def deep(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config = json.loads((TESTS / "tiny-llama.json").read_text())
    config["num_hidden_layers"] = 16
    folder = tmp_path_factory.mktemp("deep-tiny-llama")
    (folder / "config.json").write_text(json.dumps(config))
    return folder / "config.json"


def _figures(part: object) -> dict:
    return {key: value for key, value in asdict(part).items() if key != "seconds"}  # type: ignore[call-overload]


@pytest.mark.parametrize("setup", list(BY_ID))
def test_the_fast_path_gives_the_exact_simulations_figures(setup: str, deep: Path) -> None:
    source = resolve_model(str(deep))
    for program in ("cpu", "cuda"):
        first, row = (parse_row(BY_ID[setup].row.format(b=batch, s=16)) for batch in (2, 5))
        try:
            exact = _figures(simulate_exactly(row, source, program, METHOD))
        except Exception as error:  # a set-up the architecture cannot run fails alike on both paths
            with pytest.raises(type(error)):
                simulate_part(row, source, program)
            continue
        simulate_part(first, source, program)  # batch 2 by the small depths: batch 5 is then read off the line
        assert _figures(simulate_part(row, source, program)) == exact, (setup, program)
