"""The package's shape, as tests: stages import only downward, modules and functions stay small, build and
diff never import torch, the worker server's preload names resolve, and one build loads each file once."""

import ast
import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import TINY_MODEL

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "generator"
# cli → {predict, report} → {measure, diff, answers} → store → core, edge by edge: each stage may import itself
# and the stages listed here, and no other (report → measure and predict → diff are not edges of the graph).
ALLOWED = {
    "cli": {"predict", "report", "measure", "diff", "answers", "store", "core"},
    "predict": {"measure", "answers", "store", "core"},
    "report": {"diff", "answers", "store", "core"},
    "measure": {"store", "core"},
    "diff": {"store", "core"},
    "answers": {"store", "core"},
    "store": {"core"},
    "core": set(),
}
LEVELS = {"cli": 4, "predict": 3, "report": 3, "measure": 2, "diff": 2, "answers": 2, "store": 1}


def stage(module: str) -> str:
    """'generator.store.codec' -> 'store'; a flat module of generator/ is the core."""
    parts = module.split(".")
    if len(parts) == 1 or parts[0] != "generator":
        return ""
    if parts[1] == "__main__":
        return "cli"  # `python -m generator` is the command line
    return parts[1] if parts[1] in LEVELS else "core"


def level(name: str) -> int:
    return LEVELS.get(name, 0)


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        relative = path.relative_to(REPO).with_suffix("")
        name = ".".join(relative.parts).removesuffix(".__init__")
        found[name] = path
    return found


def imported(path: Path) -> set[str]:
    """Every generator module a file imports, at the top or inside a function."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return {name for name in names if name.startswith("generator.") and stage(name)}


def violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports along no edge of the stated graph: upward, sideways, or skipping to a stage the graph does not
    connect."""
    found = []
    for module, targets in graph.items():
        source = stage(module)
        for target in targets:
            other = stage(target)
            if other != source and other not in ALLOWED[source]:
                found.append(f"{module} ({source}) imports {target} ({other})")
    return found


def test_stages_import_only_downward() -> None:
    graph = {name: imported(path) for name, path in modules().items()}
    assert violations(graph) == []


def test_the_stage_check_catches_an_upward_and_a_sideways_import() -> None:
    assert violations({"generator.store.codec": {"generator.measure.worker"}})
    assert violations({"generator.report.site": {"generator.predict.fit"}})
    assert violations({"generator.units": {"generator.store.records"}})
    assert not violations({"generator.report.versions": {"generator.diff.compare", "generator.units"}})
    # edges the stated graph does not have, though they point down a level
    assert violations({"generator.report.site": {"generator.measure.environment"}})
    assert violations({"generator.predict.refresh": {"generator.diff.compare"}})
    assert violations({"generator.answers.setups": {"generator.measure.worker"}})
    assert not violations({"generator.cli.commands": {"generator.store.catalog", "generator.answers.setups"}})


def predict_violations(graph: dict[str, set[str]]) -> list[str]:
    """Inside predict, one direction: the exact simulation (predict.exact) imports neither the fast path nor the
    rest of predict, and the fast path (predict.fast) imports the exact one but not the rest of predict."""
    found = []
    for module, targets in graph.items():
        part = module.split(".")[2] if module.startswith("generator.predict.") else ""
        for target in (t for t in targets if t.startswith("generator.predict.")):
            other = target.split(".")[2]
            allowed = {"exact": {"exact"}, "fast": {"fast", "exact"}}.get(part)
            if allowed is not None and other not in allowed:
                found.append(f"{module} imports {target}")
    return found


def test_the_exact_simulation_never_imports_the_fast_path() -> None:
    graph = {name: imported(path) for name, path in modules().items()}
    assert {name.split(".")[2] for name in graph if name.count(".") >= 3 and name.startswith("generator.predict.")
            } == {"exact", "fast"}
    assert predict_violations(graph) == []
    assert predict_violations({"generator.predict.exact.run": {"generator.predict.fast.fake_mode"}})
    assert predict_violations({"generator.predict.fast.depth": {"generator.predict.simulate"}})
    assert not predict_violations({"generator.predict.fast.small_depths": {"generator.predict.exact.run"},
                                   "generator.predict.simulate": {"generator.predict.fast.batches"}})


def test_no_module_over_300_lines_and_no_function_over_50() -> None:
    long_modules, long_functions = [], []
    for name, path in modules().items():
        text = path.read_text()
        if len(text.splitlines()) > 300:
            long_modules.append(name)
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                length = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if length > 50:
                    long_functions.append(f"{name}.{node.name} ({length} lines)")
    assert long_modules == [] and long_functions == []


@pytest.mark.parametrize("command", ["build", "diff"])
def test_build_and_diff_never_import_the_measuring_stack(command: str, tmp_path: Path) -> None:
    environment = max(path for path in (REPO / "measurements").iterdir()  # a folder of SmolLM2's rows
                      if (path / "SmolLM2-135M-Instruct").is_dir())
    argv = (["build", "--output", str(tmp_path / "site")] if command == "build"
            else ["diff", str(environment), str(environment), "--format", "json"])
    code = (f"import sys; from generator.cli import main; code = main({argv!r}); "
            "heavy = sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules); "
            "print('IMPORTED', heavy, file=sys.stderr); raise SystemExit(code)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=False)
    assert result.returncode == 0, result.stderr
    assert "IMPORTED []" in result.stderr


def test_the_worker_servers_preload_names_resolve() -> None:
    """multiprocessing's forkserver ignored a stale name silently, shifting the baseline; the server imports
    each name and fails loudly, and every name the runner sends exists."""
    from generator.measure.runner import preload_modules
    from generator.model_source import SHIPPED_MODELS, resolve_model

    for model in [*SHIPPED_MODELS, str(TINY_MODEL)]:
        for name in preload_modules(resolve_model(model)):
            assert importlib.util.find_spec(name) is not None, name


def test_a_stale_preload_name_stops_the_server_with_its_reason() -> None:
    result = subprocess.run([sys.executable, "-m", "generator.measure.server", "generator.no_such_module"],
                            input="", capture_output=True, text=True, check=False)
    assert result.returncode != 0 and "generator.no_such_module" in result.stderr


def test_one_build_loads_each_result_file_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from generator.report.site import build_site
    from generator.store import codec

    loads: list[Path] = []
    parse = codec.parse
    monkeypatch.setattr(codec, "parse", lambda text, path: loads.append(path) or parse(text, path))
    build_site(REPO / "measurements", tmp_path / "site")
    files = [p for p in (REPO / "measurements").rglob("*.toml")
             if not p.name.startswith("_") and not p.parent.name.startswith("_")]  # side files and folders
    assert sorted(loads) == sorted(files)


@pytest.mark.parametrize("name", sorted(LEVELS))
def test_each_stage_docstring_names_every_module_of_the_stage(name: str) -> None:
    """The map a newcomer reads first: a stage's __init__ docstring names each of its modules as ``module``."""
    folder = PACKAGE / name
    docstring = ast.get_docstring(ast.parse((folder / "__init__.py").read_text())) or ""
    missing = [path.stem for path in sorted(folder.glob("*.py"))
               if path.stem != "__init__" and f"``{path.stem}``" not in docstring]
    assert missing == [], f"generator/{name}/__init__.py does not name {missing}"


def test_the_paths_the_code_names_exist() -> None:
    """Every generator/… or tests/… file a docstring or comment names is there."""
    import re

    stale = [f"{path.relative_to(REPO)} names {named}" for path in PACKAGE.rglob("*.py")
             for named in re.findall(r"\b((?:generator|tests)/[\w/]+\.py)\b", path.read_text())
             if not (REPO / named).is_file()]
    assert stale == []


def test_logic_compares_names_and_rowspec_spells_every_row_id() -> None:
    """No row id spelled by an f-string outside generator/matrix.py (RowSpec and article_row spell them), and no
    mode, verdict, direction or slice compared with a string literal: logic compares the enums' names, and
    report makes the words."""
    import re

    spelled = re.compile(r"""f["'](?:train|infer|gen|baseline)-|\.replace\(f["']-b""")
    literal = re.compile(r"""\b(?:mode|verdict|direction|rest_direction|(?:c|part|component)\.name)\s*(?:==|!=|in)\s*"""
                         r"""\(?\s*["']""")
    found = [f"{path.relative_to(REPO)}:{number}: {line.strip()}" for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if (spelled.search(line) and path.name != "matrix.py") or literal.search(line)]
    templates = [f"{path.name}: {hit}" for path in sorted((REPO / "templates").glob("*.j2"))
                 for hit in re.findall(r"\{%-?\s*(?:if|elif)[^%]*(?:direction|verdict|mode)\s*==[^%]*%\}",
                                       path.read_text())]
    assert found == [] and templates == []


def test_a_coordinate_is_declared_once_and_behaves_in_one_place() -> None:
    """The QLoRA coordinate as the issue's test case of adding one: the files that read a row's quantization are
    its field and rules (matrix.py), its entry in the coordinates table (coordinates.py, which the ids, labels,
    estimate and result files read), its behaviour (steps.py, and quantize.py, where everything bitsandbytes
    does lives, real and simulated), the article's low-bit section, the page that shows it, and the published
    suite's judgement, which groups QLoRA entries apart (answers/published.py). The worker, the simulator and the
    store read none of it; a new reader fails here and has to say why."""
    import re

    reads = re.compile(r"""\.quantization\b|["']quantization["']""")
    found = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py") if reads.search(path.read_text())}
    assert found == {"matrix.py", "coordinates.py", "steps.py", "quantize.py", "report/low_bit.py",
                     "answers/published.py"}


def test_the_usable_budget_rule_has_one_home() -> None:
    """Budget times one less the margin is written once, answers/fit.py usable_bytes; everything else calls it (the
    calculator applies the margins the page emits), and the stated margin has one name."""
    import re

    rule = re.compile(r"\*\s*\(1 - [^)]*(margin|MARGIN)")
    found = [f"{path.relative_to(PACKAGE)}:{number}" for path in sorted(PACKAGE.rglob("*.py"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if rule.search(line) and path.relative_to(PACKAGE).as_posix() != "answers/fit.py"]
    names = {name for path in PACKAGE.rglob("*.py")
             for name in re.findall(r"^([A-Z_]*MARGIN) = ", path.read_text(), re.MULTILINE)}
    # MIN_MARGIN is another quantity: the least band accuracy.py keeps, not a margin an answer takes off
    assert found == [] and names - {"MIN_MARGIN"} == {"STATED_MARGIN"}, (found, names)


def test_the_memory_categories_are_declared_once() -> None:
    """The four categories of a simulated peak are spelled in generator/categories.py only; the tracker, a sharded
    card, the release history and predict's lines read them there."""
    import re

    spelled = re.compile(r"""["']weights["'],\s*["']gradients["'],\s*["']optimizer["']|["']AdamW state["']:\s*["']""")
    found = [str(path.relative_to(PACKAGE)) for path in sorted(PACKAGE.rglob("*.py"))
             if spelled.search(path.read_text())]
    assert found == ["categories.py"], found
