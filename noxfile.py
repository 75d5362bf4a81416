"""Sessions for memory-budget. The main job is `nox -s measure build`; the tests are `nox -s tests` (the fast
tier, for every change) and `nox -s tests_full` (everything, before a merge and in CI).

Virtualenvs are reused between runs (a second run installs nothing new), and every session passes its
positional arguments through: `nox -s measure -- --rows train-b8 --force`.
"""

import os

import nox
from nox.command import CommandFailed

nox.options.reuse_venv = "yes"
nox.options.sessions = ["tests", "lint"]  # the fast tier; tests_full is the whole suite
nox.options.error_on_missing_interpreters = True

# torch is pinned exactly: on the machines this project runs on, `pip install torch==2.13.0` takes a local
# CPU wheel, while any looser spec makes pip download a CUDA build of several GB. It is installed before the
# project, so the project's own `torch>=2.4` range is already satisfied and pulls nothing more.
TORCH = "torch==2.13.0"
# The libraries a peak depends on are pinned to the versions the committed measurements and curves were made
# under, so that a fresh clone tests, measures and builds what main holds: a newer release is a new environment
# (its own folder, compared with `diff`), chosen on purpose with `measure_versions` or `history`, never picked up
# by a reinstall. (transformers 5.25.0 reached the registry after 5.24.0's curves were committed; a fresh clone
# then recorded curves the page could not offer, under other versions than its table's.)
TRANSFORMERS, PEFT, BITSANDBYTES = "transformers==5.24.0", "peft==0.21.2", "bitsandbytes==0.50.2"
STACK = (TRANSFORMERS, PEFT, BITSANDBYTES)
# The site's stack is pinned too: the golden test compares the built pages and SVGs to the byte, and another
# altair or vl-convert draws another SVG. These are the versions site/ was built under.
SITE_STACK = ("altair==6.3.0", "jinja2==3.1.6", "markdown-it-py==4.3.0", "markupsafe==3.0.4",
              "vl-convert-python==1.9.0.post1")


@nox.session
def measure(session: nox.Session) -> None:
    """The main job's first half: measure the matrix into measurements/<environment>/ (posargs go to
    `memory-budget measure`), then `refresh` what the page needs beside it. `nox -s measure build` is the job."""
    session.install(TORCH)
    session.install("-e", ".[measure,cluster]", *STACK)
    session.run("memory-budget", "measure", *session.posargs, success_codes=[0, 1])  # 1: a row failed, and says so
    session.run("memory-budget", "refresh")  # predictions, the step-2 cap, the fit curves: what the page needs


@nox.session
def allocators(session: nox.Session) -> None:
    """The allocator comparison, beside the main job (it takes about as long again): batch-8 training and
    checkpointing under glibc, glibc-tuned, jemalloc and tcmalloc, then the default matrix under glibc-tuned,
    then `refresh`. jemalloc and tcmalloc need Debian's libjemalloc2 and libtcmalloc-minimal4."""
    session.install(TORCH)
    session.install("-e", ".[measure,cluster]", *STACK)
    session.run("memory-budget", "measure", "--rows", "train-b8", "train-b8-ckpt", "--allocator", "glibc",
                "glibc-tuned", "jemalloc", "tcmalloc", *session.posargs, success_codes=[0, 1])
    session.run("memory-budget", "measure", "--allocator", "glibc-tuned", *session.posargs, success_codes=[0, 1])
    session.run("memory-budget", "refresh")


@nox.session
def setups(session: nox.Session) -> None:
    """The set-ups people run and the rows no fit has seen, under glibc and glibc-tuned: generation with the KV
    cache, mixed precision, LoRA on a bf16 base (cheap on a CPU with native bf16, slow without), shapes past
    the default range, GPT-2's matrix and a third family (Qwen2-0.5B); then `refresh` for each model."""
    session.install(TORCH)
    session.install("-e", ".[measure,cluster]", *STACK)
    both = ("--allocator", "glibc", "glibc-tuned", "--repeats", "2")
    for arguments in (("--rows", "gen-b1-n64", "train-b8-amp", "train-b8-bf16-lora8"),
                      ("--rows", "train-b16", "infer-b32-s512", "train-b2-s1024", "train-b1-s2048"),
                      ("--model", "gpt2"),
                      ("--model", "Qwen2-0.5B", "--rows", "infer-b8", "train-b1", "gen-b1-n64")):
        session.run("memory-budget", "measure", *arguments, *both, success_codes=[0, 1])
    for model in ("SmolLM2-135M-Instruct", "gpt2", "Qwen2-0.5B"):
        session.run("memory-budget", "refresh", "--model", model)


# The memory savers' rows (generator/savers.py), each beside the plain full fine-tunes the judging line is fitted on
# (tests/test_savers_measured.py): about 9 minutes on a 2-core machine with native bf16.
SAVER_ROWS = ("train-b4", "train-b8", "train-b16", "train-b8-cce", "train-b8-flce", "train-b8-bf16-flce",
              "train-b8-offload", "train-b8-ckpt-offload", "train-b8-optbwd", "train-b8-padam8",
              "train-b8-lora8-alllin", "train-b8-ckpt-lora8", "train-b8-ckpt-bf16-nf4-lora8",
              "train-b8-ckpt-bf16-padam8-optbwd-cce")


@nox.session
def savers(session: nox.Session) -> None:
    """Each memory saver measured once under glibc-tuned beside the plain rows, then `refresh` (predictions)."""
    session.install(TORCH)
    session.install("-e", ".[measure,cluster]", *STACK)
    session.run("memory-budget", "measure", "--rows", *SAVER_ROWS, "--allocator", "glibc-tuned", "--repeats", "1",
                *session.posargs, success_codes=[0, 1])
    session.run("memory-budget", "refresh")


# What a new release needs measured before its answers stand on their own: the article model's default matrix (the
# rows the versions page sets beside the pinned release's, with the diff's verdict) and three rows of a second model,
# so that the process model's band is judged out of sample (a model's rows predicted by a line fitted without them).
SECOND_MODEL_ROWS = ("--model", "gpt2", "--rows", "infer-b8", "train-b1", "train-b4")
ONE_REPEAT = ("--repeats", "1")  # a release's first look: one repeat a row (diff's 5 % noise floor then judges it)


@nox.session
def release(session: nox.Session) -> None:
    """A new transformers release in one command: `nox -s release` (the newest on the registry) or `nox -s release
    -- 5.25.0`. In its own virtualenv it measures the rows the process model needs (the default matrix, and
    SECOND_MODEL_ROWS, one repeat each), refreshes what the page needs under that release (predictions, the probe,
    the fit curves) and builds the site, whose versions page then sets the release beside the others with the
    diff's verdict."""
    session.install(TORCH)
    wanted = f"transformers=={session.posargs[0]}" if session.posargs else "transformers"
    session.install("--upgrade", "-e", ".[measure,site,cluster]", wanted, PEFT, BITSANDBYTES, *SITE_STACK)
    session.run("memory-budget", "measure", *ONE_REPEAT, success_codes=[0, 1])  # 1: a row failed, and says so
    session.run("memory-budget", "measure", *SECOND_MODEL_ROWS, *ONE_REPEAT, success_codes=[0, 1])
    session.run("memory-budget", "refresh")
    session.run("memory-budget", "refresh", "--model", "gpt2")
    session.run("memory-budget", "build")


# The releases the versions page compares. 4.57.6 is the last 4.x; 5.22.0 is the release a well-known write-up
# of this experiment used; 5.24.0 is the pinned one (STACK). peft 0.21.2 works with all three.
TRANSFORMERS_RELEASES = ["4.57.6", "5.22.0", "5.24.0"]


@nox.session
@nox.parametrize("transformers", TRANSFORMERS_RELEASES)
def measure_versions(session: nox.Session, transformers: str) -> None:
    """Measure the default matrix under one transformers release, in its own virtualenv and environment folder.

    `nox -s "measure_versions(transformers='4.57.6')"`. torch stays at the pinned version unless
    MEMORY_BUDGET_TORCH names another (cheap where pip need not download a CUDA build); MEMORY_BUDGET_PEFT
    picks peft likewise. posargs go to `memory-budget measure`. A release that cannot run a row records it as
    failed, with the reason."""
    session.install(f"torch=={os.environ.get('MEMORY_BUDGET_TORCH', TORCH.split('==')[1])}")
    session.install("-e", ".[measure,cluster]", f"transformers=={transformers}",
                    f"peft=={os.environ.get('MEMORY_BUDGET_PEFT', PEFT.split('==')[1])}", BITSANDBYTES)
    session.run("memory-budget", "measure", *session.posargs)


# The releases `nox -s history` simulates, oldest first: about every third minor release of 4.x back to where
# the pinned torch and peft stop importing, and of 5.x up to the newest.
HISTORY_RELEASES = ["4.36.2", "4.40.2", "4.44.2", "4.46.3", "4.48.3", "4.50.3", "4.52.4", "4.54.1", "4.56.2",
                    "4.57.6", "5.0.0", "5.3.0", "5.6.2", "5.9.0", "5.12.1", "5.15.1", "5.18.0", "5.20.2", "5.22.2",
                    "5.24.0", "5.25.0"]


@nox.session
def history(session: nox.Session) -> None:
    """Memory history across releases: the default rows' tensor peaks simulated under each release of
    HISTORY_RELEASES, installed one after another into this session's virtualenv (the pinned torch and peft
    stay), into measurements/_history/<model>.toml. posargs go to `memory-budget history`, e.g.
    `nox -s history -- --model path/to/config.json`. A release pip cannot install is recorded with the reason;
    one that installs but cannot simulate a row records that row's error."""
    session.install(TORCH)
    session.install("-e", ".[measure]", *STACK)
    for release in HISTORY_RELEASES:
        try:
            session.install(f"transformers=={release}", silent=True)
        except CommandFailed as error:
            session.run("memory-budget", "history", "--not-installable", f"{release}: {error.reason or 'pip failed'}",
                        *session.posargs)
            continue
        session.run("memory-budget", "history", *session.posargs, success_codes=[0, 1])


@nox.session
def diff(session: nox.Session) -> None:
    """Compare two environments' rows: `nox -s diff -- BEFORE AFTER [--format md|json] [--threshold 2%]`."""
    session.install("-e", ".")
    session.run("memory-budget", "diff", *session.posargs)


@nox.session
def build(session: nox.Session) -> None:
    """Build site/index.md, site/index.html and the charts from measurements/ (posargs go to `build`)."""
    session.install("-e", ".[site]", *SITE_STACK)
    session.run("memory-budget", "build", *session.posargs)


# The tests run on every core (pytest-xdist), a worker that runs out of tests taking the rest of another's queue
# (worksteal: the per-architecture tests are long, and a fixed split left one core idle for the last minutes): most
# are one process's simulation or a subprocess. A session fixture (the measured tiny matrix) is made once per worker.
PARALLEL = ("-n", "auto", "--dist", "worksteal")


@nox.session
def tests(session: nox.Session) -> None:
    """The fast tier, for every change: the tests not marked slow (tests/conftest.py says which are), in about
    two minutes on two cores. `nox -s tests_full` runs everything, as CI does."""
    session.install(TORCH)
    session.install("-e", ".[measure,site,test,cluster]", *STACK, *SITE_STACK)
    session.run("pytest", "-m", "not slow", *PARALLEL, *session.posargs)


@nox.session
def tests_full(session: nox.Session) -> None:
    """Every test: real worker processes on a tiny Llama config, the browser checks of the built pages, the
    simulations at scale. Run it before a merge; CI runs it on a fresh clone."""
    session.install(TORCH)
    session.install("-e", ".[measure,site,test,cluster]", *STACK, *SITE_STACK)
    session.run("pytest", *PARALLEL, *session.posargs)


@nox.session
def gpu(session: nox.Session) -> None:
    """The GPU validation kit, on a machine with CUDA: the context, a GPU matrix and the fit page's answers at
    their batch, each in a fresh process, into measurements/<cuda environment>/ (posargs go to
    `memory-budget gpu`, e.g. `--models SmolLM2-135M-Instruct --card 16GiB`). torch is MEMORY_BUDGET_GPU_TORCH,
    by default whatever `pip install torch` gives there (a CUDA build on Linux)."""
    session.install(os.environ.get("MEMORY_BUDGET_GPU_TORCH", "torch"))
    session.install("-e", ".[measure]", *STACK)
    session.run("memory-budget", "gpu", *session.posargs, success_codes=[0, 1])  # 1: a row failed, and says so


@nox.session
def benchmark(session: nox.Session) -> None:
    """Record the speed and memory of predict and fit into measurements/<environment>/_benchmarks.toml
    (posargs: --only predict|fit, --label TEXT)."""
    session.install(TORCH)
    session.install("-e", ".[measure]", *STACK)
    session.run("python", "-m", "generator.predict.benchmark", *session.posargs)


@nox.session
def mutation(session: nox.Session) -> None:
    """Plant small bugs (mutmut) in the modules pyproject.toml's [tool.mutmut] names, run the fast tests against
    each, and print the score per module (generator/... : killed / total)."""
    session.install("mutmut>=3.3", "-e", ".[site,test]")
    session.run("mutmut", "run", success_codes=[0, 1])
    # Under parallel load mutmut can miss a timeout; run each survivor again, alone, before counting.
    results = session.run("mutmut", "results", silent=True) or ""
    survivors = [line.split(":")[0].strip() for line in results.splitlines() if line.endswith(": survived")]
    if survivors:
        session.run("mutmut", "run", "--max-children", "1", *survivors, success_codes=[0, 1])
    session.run("python", "tests/mutation_report.py")


@nox.session
def serve(session: nox.Session) -> None:
    """Preview site/ at http://127.0.0.1:8000/ (posargs: another port). Serves files only, on localhost only."""
    port = session.posargs[0] if session.posargs else "8000"
    session.run("python", "-m", "http.server", port, "--bind", "127.0.0.1", "--directory", "site")


@nox.session
def lint(session: nox.Session) -> None:
    """Check style and common bugs with ruff, and types with mypy (settings in pyproject.toml)."""
    session.install(TORCH)  # mypy checks against the libraries the code runs with
    session.install("ruff", "mypy", "-e", ".[measure,site,test,cluster]", *STACK, *SITE_STACK)
    session.run("ruff", "check", ".", *session.posargs)
    session.run("mypy")
