"""Sessions for memory-budget. The main job is `nox -s measure build`; the test command is `nox -s tests`.

Virtualenvs are reused between runs (a second run installs nothing new), and every session passes its
positional arguments through: `nox -s measure -- --rows train-b8 --force`.
"""

import nox

nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint"]
nox.options.error_on_missing_interpreters = True

# torch is pinned exactly: on the machines this project runs on, `pip install torch==2.13.0` takes a local
# CPU wheel, while any looser spec makes pip download a CUDA build of several GB. It is installed before the
# project, so the project's own `torch>=2.4` range is already satisfied and pulls nothing more.
TORCH = "torch==2.13.0"


@nox.session
def measure(session: nox.Session) -> None:
    """Run the measurement matrix into measurements/<environment>/ (posargs go to `memory-budget measure`)."""
    session.install(TORCH)
    session.install("-e", ".[measure]")
    session.run("memory-budget", "measure", *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Build site/index.md, site/index.html and the charts from measurements/ (posargs go to `build`)."""
    session.install("-e", ".[site]")
    session.run("memory-budget", "build", *session.posargs)


@nox.session
def tests(session: nox.Session) -> None:
    """Run the test suite: real worker processes on a tiny Llama config, then build and check the pages."""
    session.install(TORCH)
    session.install("-e", ".[measure,site,test]")
    session.run("pytest", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and common bugs with ruff."""
    session.install("ruff")
    session.run("ruff", "check", ".", *session.posargs)
