"""The stack is pinned to what main's curves were simulated under: the noxfile installs the torch, transformers and
peft of the committed fit table, and the suite runs under them. A newer transformers reaching the registry once
made a fresh clone's CI record curves under other versions than the table's, which the page could not offer; this
says so in one line instead."""

import ast
from importlib import metadata
from pathlib import Path

from generator.store.fit_table import load_fit
from generator.store.layout import fit_files

REPO = Path(__file__).resolve().parent.parent


def _pins() -> dict[str, str]:
    """The noxfile's pinned packages, name -> version, read from its module-level string constants."""
    tree = ast.parse((REPO / "noxfile.py").read_text())
    texts = [node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and isinstance(node.value, str)]
    pins = [text.split("==") for text in texts if text.count("==") == 1 and " " not in text]
    return {name: version for name, version in pins
            if version and name in ("torch", "transformers", "peft", "bitsandbytes", *SITE)}


SITE = ("altair", "jinja2", "markdown-it-py", "markupsafe", "vl-convert-python")  # the golden pages' stack


def _committed_libraries() -> set[str]:
    tables = [load_fit(path.parent) for path in fit_files(REPO / "measurements")]
    return {table.libraries for table in tables if table is not None}


def test_the_noxfile_pins_the_versions_of_the_committed_curves() -> None:
    pins = _pins()
    assert set(pins) == {"torch", "transformers", "peft", "bitsandbytes", *SITE}, pins
    wanted = f"torch {pins['torch']}+cpu, transformers {pins['transformers']}, peft {pins['peft']}"
    assert _committed_libraries() == {wanted}, "the noxfile's pins are not the committed fit table's libraries"


def test_the_suite_runs_under_the_pinned_versions() -> None:
    found = {name: metadata.version(name).split("+")[0] for name in _pins()}
    assert found == _pins(), "run the suite as `nox -s tests`, which installs the pinned versions"
