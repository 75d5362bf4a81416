"""A hash of the measuring code, recorded in every result beside the hand-bumped method_version, so that a
change to how rows are measured cannot go unnoticed (`diff` names it when two sides differ).

It hashes the syntax trees of the modules that decide what a figure means, so comments and formatting do not
change it; their docstrings are left out too."""

import ast
import hashlib
from functools import cache
from importlib import resources

MEASURING_MODULES = ("generator.measure.worker", "generator.measure.peak", "generator.measure.limits",
                     "generator.measure.server", "generator.steps", "generator.quantize")


def _without_docstrings(tree: ast.AST) -> ast.AST:
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(body, list) and body and isinstance(body[0], ast.Expr)
                and isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]  # type: ignore[attr-defined]
    return tree


def module_source(name: str) -> str:
    """A module's source text, read from the installed package."""
    package, _, module = name.rpartition(".")
    return (resources.files(package) / f"{module}.py").read_text(encoding="utf-8")


def _hash(modules: tuple[str, ...]) -> str:
    digest = hashlib.sha256()
    for name in modules:
        digest.update(name.encode())
        digest.update(ast.dump(_without_docstrings(ast.parse(module_source(name)))).encode())
    return digest.hexdigest()[:12]


@cache
def code_hash(modules: tuple[str, ...]) -> str:
    """The first 12 hex digits of the SHA-256 of these modules' syntax trees (the simulator's, say)."""
    return _hash(modules)


@cache
def method_hash() -> str:
    """The measuring modules' hash."""
    return _hash(MEASURING_MODULES)
