"""The depth fast path (generator/predict/fast/depth.py) is the full simulation, byte for byte: every figure of the
prediction but its seconds, and the trace the allocator replays, on each of the 14 architectures in
tests/architectures/ (grown to eight layers) for every set-up the answers are given for, and on the shipped
configs at their own depth; and so is a later batch of the same row answered from the shape the first one read
(one small depth, the shape's a+1, instead of four), or from a shape read at three (a batch that takes other
paths, the stack seen to repeat at the first), as fit's search asks them. A stack whose trace does not repeat gets
no fast answer, and a journal replays to the figures of the run that wrote it."""

import json
from dataclasses import replace
from pathlib import Path

import pytest
from conftest import TESTS
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.answers.setups import KINDS
from generator.matrix import RowSpec, parse_row
from generator.model_source import ModelSource, resolve_model
from generator.predict.exact.parts import PROGRAMS, _cpu_part, _cuda_part
from generator.predict.exact.tracker import StorageTracker
from generator.predict.fast import depth, inserted_runs
from generator.predict.fast.small_depths import SHAPES, shape_key, simulate_by_depth, simulate_full, simulate_like
from generator.predict.fast.small_depths import fast_run as _run
from generator.predict.simulate import METHOD

pytestmark = pytest.mark.slow  # simulates every architecture and shipped config at full depth, twice

ARCHITECTURES = sorted((TESTS / "architectures").glob("*.json"))
MODELS = Path(__file__).resolve().parent.parent / "generator" / "models"
SETUP_ROWS = [*(template.format(b=2, s=16) for template in KINDS.values()), "train-b2-s16-amp-zero3x4"]


# The rows each architecture leaves to the full simulation (at eight layers): where its trace does not yet extend
# by this path's rules (depth.py). Every other row is answered fast, and equal.
FULL_DEPTH_ONLY: dict[str, set[str]] = {
    "bloom": {"train-b2-s16-amp", "train-b2-s16-amp-adam8", "train-b2-s16-amp-zero3x4"},
    "gemma2": {"gen-b2-s16-n32-bf16"},
    "gpt2": {
        "train-b2-s16",
        "train-b2-s16-amp",
        "train-b2-s16-amp-adam8",
        "train-b2-s16-amp-zero3x4",
        "train-b2-s16-bf16",
        "train-b2-s16-bf16-lora8",
        "train-b2-s16-bf16-nf4-lora8",
        "train-b2-s16-lora8",
    },
    "gpt_neox": {"train-b2-s16-amp", "train-b2-s16-amp-adam8", "train-b2-s16-amp-zero3x4"},
    "opt": {
        "train-b2-s16-amp",
        "train-b2-s16-amp-adam8",
        "train-b2-s16-amp-zero3x4",
        "train-b2-s16-bf16-lora8",
        "train-b2-s16-bf16-nf4-lora8",
        "train-b2-s16-lora8",
    },
    "phi": {"train-b2-s16-amp", "train-b2-s16-amp-adam8", "train-b2-s16-amp-zero3x4"},
    "qwen2": {"train-b2-s16-amp", "train-b2-s16-amp-adam8", "train-b2-s16-amp-zero3x4"},
    "qwen2_moe": {"train-b2-s16-amp", "train-b2-s16-amp-adam8", "train-b2-s16-amp-zero3x4"},
}


# What every architecture leaves to the full simulation: a checkpointed 4-bit base (quantize.checkpointed_four_bit)
ALWAYS_FULL = {KINDS["QLoRA + checkpointing"].format(b=2, s=16)}


@pytest.fixture(autouse=True)
def _no_shapes_kept() -> None:
    """Each test reads its own shapes: a shape another test read would answer in place of the four depths."""
    SHAPES.clear()


def _deep(path: Path, folder: Path, layers: int = 8) -> ModelSource:
    config = json.loads(path.read_text())
    for key in ("num_hidden_layers", "n_layer"):
        if key in config:
            config[key] = layers
    deep = folder / path.name
    deep.write_text(json.dumps(config))
    return resolve_model(str(deep))


def _figures(found: tuple, row_id: str, program: str) -> tuple:
    """The program's part without its seconds, and its trace as (bytes, made) with its phase marks."""
    tracker, facts, rerouted = found
    make = _cpu_part if program == "cpu" else _cuda_part
    trace = ([(size, made) for _, size, made in tracker.events], tracker.phase_marks)
    return replace(make(tracker, facts, parse_row(row_id), METHOD, 0.0), seconds=0.0), trace, rerouted


def _same(row_id: str, source: ModelSource, again: tuple[int, ...] = (5, 1), served: int = 5) -> bool:
    """Whether the fast path answers the row for both programs, and the shape read at an earlier batch answers the
    row at the ``served`` one of the ``again`` batches (batch 1, which takes other paths, reads its own from three
    small depths); wherever either answers a program, its answer is the full simulation's."""
    row, answered = parse_row(row_id), []
    for name, program in PROGRAMS.items():
        try:
            full = simulate_full(row, source, program, fast=False)
        except Exception as error:  # a set-up the architecture cannot run: the fast path fails the same way
            with pytest.raises(type(error)):
                simulate_by_depth(row, source, program)
            answered.append(True)
            continue
        fast = simulate_by_depth(row, source, program)
        if fast is not None:
            assert _figures(fast, row_id, name) == _figures(full, row_id, name), f"{row_id} ({name}) on {source.name}"
        answered.append(fast is not None and _again(row, source, name, again, served))
    return all(answered)


def _again(row: RowSpec, source: ModelSource, name: str, batches: tuple[int, ...], served: int) -> bool:
    """The row at later batches, as fit's search asks them: from the shape an earlier batch read, else from three
    small depths (the stack was seen to repeat at the earlier batch) or four, which read a shape in turn; each
    answer is the full simulation's. Whether the shape answered the ``served`` batch."""
    answered = False
    for batch in batches:
        other = replace(row, batch_size=batch)
        like = simulate_like(other, source, PROGRAMS[name])
        found = like or simulate_by_depth(other, source, PROGRAMS[name])
        if found is None and batch == 1:  # a batch of one the path does not answer from four depths either
            SHAPES.pop(shape_key(other, source, PROGRAMS[name]), None)  # (Mixtral's on the CPU): read afresh, as first
            assert simulate_by_depth(other, source, PROGRAMS[name]) is None, f"{other.id} ({name}): three lost it"
            continue
        assert found is not None, f"{other.id} ({name}) on {source.name}: no fast answer at another batch"
        full = simulate_full(other, source, PROGRAMS[name], fast=False)
        where = f"{other.id} ({name}) on {source.name}"
        assert _figures(found, other.id, name) == _figures(full, other.id, name), where
        answered = answered or (batch == served and like is not None)
    return answered


@pytest.mark.parametrize("path", ARCHITECTURES, ids=lambda path: path.stem)
@pytest.mark.slow  # simulates at scale or starts real processes
def test_the_fast_path_is_the_full_simulation_on_every_architecture(path: Path, tmp_path: Path) -> None:
    """Every fast answer is the full simulation's; the rows it leaves to the full simulation are the known ones
    (a stack whose trace this path cannot yet extend), so a new one fails here, and so does one that starts
    to answer."""
    source = _deep(path, tmp_path)
    slow = {row_id for row_id in SETUP_ROWS if not _same(row_id, source)}
    print(path.stem, sorted(slow))
    assert slow == FULL_DEPTH_ONLY.get(path.stem, set()) | ALWAYS_FULL


@pytest.mark.parametrize(
    ("model", "rows"),
    [  # the fast path answers each of these
        ("smollm2-135m-instruct.json", tuple(template.format(b=1, s=64) for template in KINDS.values()
                                             if template.format(b=2, s=16) not in ALWAYS_FULL)),
        ("gpt2.json", ("gen-b1-s64-n32-bf16", "train-b1-s64-ckpt")),
        ("llama-3.2-1b.json", ("train-b1-s64-amp", "train-b1-s64-bf16-lora8-zero3x8")),
        ("qwen2-0.5b.json", ("train-b1-s64-ckpt", "gen-b1-s64-n32-bf16")),
        ("llama-2-7b.json", ("train-b1-s64-bf16-nf4-lora8",)),
        ("benchmark/Llama-3.1-70B.json", ("train-b1-s64",)),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_the_fast_path_is_the_full_simulation_on_the_shipped_configs(model: str, rows: tuple[str, ...]) -> None:
    """Batch 1, then 2 and 3 as fit's search asks them (batch 1's shape may not serve batch 2: a dimension of one
    takes other paths)."""
    source = resolve_model(str(MODELS / model))
    for row_id in rows:
        assert _same(row_id, source, again=(2, 3), served=3), f"{row_id} on {model}: no fast answer"


def test_a_stack_that_does_not_repeat_gets_no_fast_answer(tmp_path: Path) -> None:
    """Depth a+2 is not depth a with its run twice (a stand-in journal), and a stack too shallow to gain."""
    made = [("made", key, 100 * key, "activations") for key in range(1, 4)]
    grows = [made[:1], made[:2], [*made[:2], ("made", 9, 999, "activations")], made]
    assert depth.extend(grows, 10) is None
    assert not depth.repeats(grows[:3])
    twice = [("made", 1, 100, "activations"), ("made", 2, 200, "activations"), ("made", 3, 200, "activations")]
    assert depth.repeats([twice[:1], twice[:2], twice])
    shallow = _deep(TESTS / "tiny-llama.json", tmp_path, 4)
    assert all(simulate_by_depth(parse_row("train-b1-s16"), shallow, program) is None for program in PROGRAMS.values())


def test_a_journal_replays_to_the_figures_of_its_run() -> None:
    row = parse_row("train-b2-s16-lora8")
    tracker, _, _ = _run(row, resolve_model(str(TESTS / "tiny-llama.json")), _program())
    again = StorageTracker.replay(tracker.journal)
    for name in ("peak", "peak_phase", "peak_split", "phase_peaks", "events", "event_kinds", "phase_marks"):
        assert getattr(again, name) == getattr(tracker, name), name


def test_arithmetic_extends_a_figure_that_grows_by_one_step() -> None:
    assert depth.arithmetic([10, 13, 16, 19], 29) == 10 + 29 * 3
    assert depth.arithmetic([10, 13, 16, 20], 29) is None
    assert depth.arithmetic([7, 7, 7, 7], 5) == 7


def _program():
    from generator.predict.exact.cuda_program import CPU

    return CPU


def _foreach_journal(layers: int) -> list[tuple]:
    """A stand-in stack of ``layers`` layers whose optimizer, like torch's foreach AdamW, makes a temporary of
    every parameter at once (embedding, the layers', a final norm's) and frees them in reverse, then writes a
    few entries of its own: one layer's made entry and its free are three entries apart, and nest."""
    names = [("e", 64), *((f"w{k}", 16) for k in range(layers)), ("f", 4)]
    journal: list[tuple] = [("made", name, size, "weights") for name, size in names]
    journal += [("phase", "forward"), *(("made", f"a{k}", 8, "activations") for k in range(layers))]
    journal += [("freed", f"a{k}") for k in reversed(range(layers))]
    journal += [("phase", "optimizer"), *(("made", f"t{name}", size, "optimizer") for name, size in names)]
    journal += [("freed", f"t{name}") for name, _ in reversed(names)]
    return journal + [entry for k in range(5) for entry in (("made", f"s{k}", 100 + k, "activations"),
                                                            ("freed", f"s{k}"))]


def _keyed_by_place(journal: list[tuple]) -> list[tuple]:
    """The journal with each storage keyed by the place of its made entry, as depth.extend writes it."""
    places = {entry[1]: place for place, entry in enumerate(journal) if entry[0] == "made"}
    return [entry if entry[0] == "phase" else (entry[0], places[entry[1]], *entry[2:]) for entry in journal]


def test_runs_that_nest_or_follow_closely_are_found_and_split() -> None:
    """The greedy windows find no runs in a foreach update's trace (a layer's temporary and its free three entries
    apart); difflib's matcher does, and each run that depth a+1 inserts whole, its made entry and its free, is
    split in two, as depth a+2 repeats each in turn. The journal written for eight layers is theirs."""
    journals = [_foreach_journal(layers) for layers in (1, 2, 3, 4)]
    base, longer = (depth._tokens(journal)[0] for journal in journals[:2])
    assert inserted_runs.find_runs(base, longer, "windows") is None
    found = depth.shape(journals)
    assert found is not None and found.aligner == "matcher" and len(found.runs) > len(found.found)
    assert depth.extend(journals, 7) == _keyed_by_place(_foreach_journal(8))


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 3), max_size=30), st.lists(st.integers(0, 3), max_size=40), st.integers(0, 30),
       st.integers(0, 40), st.sampled_from((*inserted_runs.WINDOWS, 1, 2)))
def test_a_run_resumes_where_the_plain_window_comparison_says(base, longer, i, j, window) -> None:
    """_resumes checks a place's first entry before its window: the same answer as comparing every window."""
    i, j = min(i, len(base)), min(j, len(longer))
    width = min(window, len(base) - i)
    plain = next((n for n in range(1, len(longer) - j - width + 1)
                  if longer[j + n:j + n + width] == base[i:i + width]), None)
    assert inserted_runs._resumes(base, i, longer, j, window) == plain


def test_a_batch_that_takes_other_paths_reads_its_shape_from_three_depths(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """After batch 1 read the row's shape from four small depths, batch 2 (whose journals name other storages,
    so batch 1's shape cannot serve it) reads its own from three, and answers as the full simulation does."""
    from generator.predict.exact.cuda_program import CUDA
    from generator.predict.fast import small_depths

    source, depths = _deep(TESTS / "tiny-llama.json", tmp_path, 16), []
    run_row = small_depths.run_row
    monkeypatch.setattr(small_depths, "run_row", lambda row, source, program, layers=None: (
        depths.append((row.batch_size, layers)), run_row(row, source, program, layers))[1])
    first, second = parse_row("train-b1-s16"), parse_row("train-b2-s16")
    assert simulate_by_depth(first, source, CUDA) is not None
    assert depths == [(1, 1), (1, 2), (1, 3), (1, 4)]
    assert simulate_like(second, source, CUDA) is None  # batch 1's shape does not serve batch 2
    assert depths[4:] == [(2, 2)]  # told by depth a+1 alone
    depths.clear()
    found = simulate_by_depth(second, source, CUDA)
    assert found is not None
    assert _figures(found, second.id, "cuda") == _figures(simulate_full(second, source, CUDA, fast=False), second.id,
                                                          "cuda")
    assert depths == [(2, 2), (2, 1), (2, 3)]  # depth a+1 asked of the shape first, then run once for its own


def test_three_depths_refuse_a_run_that_names_one_storage_outside_it() -> None:
    """An entry of each layer's run names one storage of depth a in both copies of depth a+2: two copies cannot
    tell that from each copy naming the one two copies back, so three depths read no shape; four, whose third copy
    names it too, read one."""
    outside = [("made", "x", 50, "activations"), ("made", "b", 100, "activations")]

    def deep(copies: int) -> list[tuple]:
        return outside + [entry for k in range(copies)
                          for entry in (("made", f"r{k}", 10, "activations"), ("kind", "x", "gradients"))]

    journals = [deep(copies) for copies in range(4)]
    assert depth.shape(journals[:3]) is None
    assert depth.shape(journals) is not None
