"""An answer between simulated batches: a GPU answer read from a curve is settled on a simulated batch (the
simulated reserves are not convex, and the chord once named batches whose simulated reserve did not fit: 8 of
SmolLM2's GPU cells, by up to 1,110 MiB), a CPU answer reads the chord; and the fit page's sentences on both
turn with the curves they describe."""

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.answers.fit import FitAnswer, answer_within, on_simulated
from generator.budget import ProcessModel
from generator.report.between import above_chord, cpu_between, gpu_between, pinned
from generator.report.fit_page import Budget, site_answers
from generator.store.fit_table import Curve, FitTable
from generator.units import GIB, MIB

# A reserve that climbs steeply from batch 8 to 12, then flattens to 16: the chord from 8 to 16 lies below it.
REAL = {b: 4 * GIB + b * 100 * MIB + (800 * MIB if b >= 12 else 0) for b in range(1, 65)}
SIMULATED = (1, 2, 4, 8, 16, 32, 64)


def _curve(values: dict[int, int], batches: tuple[int, ...] = SIMULATED, kind: str = "inference") -> Curve:
    return Curve(model="m", config_sha256="", parameters=1, setup=kind, row="infer-b{b}-s1024", batches=batches,
                 tensor_bytes=tuple(values[b] for b in batches), cuda_bytes=tuple(values[b] for b in batches))


def test_a_gpu_answer_from_a_curve_is_a_simulated_batch_that_fits() -> None:
    curve = _curve(REAL)
    usable = REAL[13] + CUDA_CONTEXT_BYTES  # the chord between 8 and 16 says 14 fits; its real reserve does not
    table = FitTable(libraries="", environment="", seq_len=1024, curves=(curve,), example=())
    process = ProcessModel(0.0, 0.0, 1, "")
    (_, gpu), (_, cpu) = site_answers(table, process, (Budget("", round(usable / 0.9) + 1, "gpu", 0.10),
                                                       Budget("", round(REAL[13] / 0.9) + 1, "cpu", 0.10)))
    assert gpu.usable_bytes >= usable and cpu.usable_bytes >= REAL[13]
    chord_answer = answer_within("inference", curve.row, lambda b: curve.cuda_at(b) + CUDA_CONTEXT_BYTES,
                                 gpu.usable_bytes, 64).batch
    assert chord_answer == 14 and REAL[14] + CUDA_CONTEXT_BYTES > gpu.usable_bytes  # what the chord alone said
    assert gpu.batch == 8 and gpu.predicted_bytes == REAL[8] + CUDA_CONTEXT_BYTES  # simulated, and it fits
    assert cpu.batch == 14  # a CPU answer reads the chord of the tensor peaks, between simulated batches


def test_on_simulated_keeps_an_answer_the_curve_pins_and_walks_past_a_drop() -> None:
    peaks = {1: 10, 2: 9, 3: 30, 4: 40, 5: 50}
    assert on_simulated(4, (1, 2, 3, 4, 5), peaks.__getitem__, 40) == 4  # the answer and the next simulated
    assert on_simulated(4, (1, 2, 5), peaks.__getitem__, 40) == 2  # between simulated batches: the one below
    assert on_simulated(4, (1, 2, 5), {1: 10, 2: 45, 5: 50}.__getitem__, 40) == 1  # past a batch that does not fit
    assert on_simulated(0, (1, 2), peaks.__getitem__, 5) == 0


def test_the_pages_sentences_turn_with_the_curves() -> None:
    straight = {b: GIB + b * MIB for b in range(1, 65)}
    assert above_chord(SIMULATED, [straight[b] for b in SIMULATED]) == 0
    assert above_chord((8, 12, 16), (REAL[8], REAL[12], REAL[16])) == REAL[12] - (REAL[8] + REAL[16]) // 2
    convex, bent = _curve(straight), _curve(REAL, (1, 2, 4, 8, 12, 16))
    assert "every one of the 2 tensor-peak curves here is convex" in cpu_between((convex, convex))
    assert "errs, if at all, towards a smaller batch" in cpu_between((convex, convex))
    worst = f"{above_chord(bent.batches, bent.tensor_bytes) / MIB:,.0f} MiB"
    assert cpu_between((convex, bent)).startswith("1 of the 2 tensor-peak curves here are not convex")
    assert worst in cpu_between((convex, bent)) and "can err either way" in cpu_between((convex, bent))
    assert gpu_between((convex, bent)).startswith(f"simulated GPU reserves are not convex in the batch (in 1 of "
                                                  f"the 2 curves a simulated batch lies above its neighbours' "
                                                  f"chord, by up to {worst})")
    assert gpu_between((convex,)).startswith("the 1 simulated GPU reserve curves are convex")
    assert "the largest simulated batch" in gpu_between((convex,)) and "the largest simulated batch" in gpu_between(
        (bent,))


def test_pinned_counts_the_answers_whose_edge_the_curve_holds() -> None:
    curve = _curve(REAL, (1, 2, 4, 8, 9, 16))

    def answer(batch: int) -> FitAnswer:
        return FitAnswer(kind="inference", row="", batch=batch, predicted_bytes=0, next_bytes=0, usable_bytes=0,
                         simulations=0, model="m")

    assert pinned([answer(8), answer(0), answer(4), answer(16)], (curve,)) == (2, 4)  # 4 and 16: no next batch


def test_the_fit_page_says_what_its_own_curves_show() -> None:
    """Rendered: a page of a bent reserve says the reserves are not convex, with the count and the size; a page
    of straight curves says they are convex; and how many of the tables' GPU answers the curves pin."""
    from generator.report.fit_page import build_fit_page
    from generator.report.render import render_page

    straight = {b: GIB + b * MIB for b in range(1, 2049)}
    pages = {}
    for name, values in (("bent", REAL), ("straight", straight)):
        table = FitTable(libraries="l", environment="e", seq_len=1024, example=(), curves=(_curve(values),))
        context = build_fit_page(table, [], ProcessModel(0.0, 0.0, 0, ""), "e", "l")
        pages[name] = " ".join(render_page("fit", context)["fit.md"].split())
    worst = f"{above_chord(SIMULATED, [REAL[b] for b in SIMULATED]) / MIB:,.0f} MiB"
    assert f"not convex in the batch (in 1 of the 1 curves a simulated batch lies above its neighbours' chord, " \
           f"by up to {worst})" in pages["bent"]
    assert "the 1 simulated GPU reserve curves are convex at their simulated batches" in pages["straight"]
    assert "not convex" not in pages["straight"] and "reserve curves are convex" not in pages["bent"]
    assert "for 0 of the 7 GPU answers in these tables" in pages["bent"]  # doublings alone pin no card here
