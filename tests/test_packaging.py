"""An installed wheel (not only a checkout) can build, and a missing extra is named in one line."""

import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # simulates configs at scale or starts processes that import torch

REPO = Path(__file__).resolve().parent.parent


def test_a_wheel_ships_the_templates_and_configs_and_builds(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", str(REPO),
                    "-w", str(tmp_path / "wheel")], check=True, capture_output=True, cwd=tmp_path)
    (wheel,) = (tmp_path / "wheel").glob("*.whl")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(tmp_path / "lib"),
                    str(wheel)], check=True, capture_output=True)
    for name in ("templates/index.md.j2", "templates/style.css", "templates/docs-commands.md",
                 "models/smollm2-135m-instruct.json",
                 "_measurements/_published/litgpt-finetune.toml", "_measurements/_published/_predicted.toml",
                 "_measurements/_published/configs/phi-2.json"):
        assert (tmp_path / "lib" / "generator" / name).is_file(), name
    result = subprocess.run([sys.executable, "-m", "generator", "build", "--measurements", str(REPO / "measurements"),
                             "--output", str(tmp_path / "site")], capture_output=True, text=True, cwd=tmp_path,
                            env={"PYTHONPATH": str(tmp_path / "lib"), "PATH": "/usr/bin:/bin"})
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "index.html").is_file()
    allowance = subprocess.run([sys.executable, "-c", "from pathlib import Path; from generator.answers.published "
                                "import suite_allowance; print(suite_allowance(Path('measurements')).ppm)"],
                               capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(tmp_path / "lib")})
    assert int(allowance.stdout) > 1_000_000, allowance.stderr  # QLoRA's allowance, from the suite the wheel ships


@pytest.mark.parametrize(("command", "blocked", "extra"), [("build", "altair", "site"),
                                                           ("measure", "torch", "measure"),
                                                           ("predict", "transformers", "measure")])
def test_a_missing_extra_is_one_line(command: str, blocked: str, extra: str) -> None:
    code = (f"import sys; sys.modules[{blocked!r}] = None; from generator.cli import main; "
            f"raise SystemExit(main([{command!r}]))")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO)
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1, result.stderr
    assert f"pip install 'memory-budget[{extra}]'" in lines[0] and blocked in lines[0]
