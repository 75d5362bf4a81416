"""An answer read from a recorded curve, in its one home: the fit page's tables, its calculator's data and `fit`
itself (wherever a curve recorded under the running libraries covers the budget) all answer by curve_answer, so
the page and the command line cannot disagree about a budget the curve covers.

A curve is a set-up's simulated peaks at a few batches (generator/store/fit_table.py). On a CPU an answer may be
any batch, read on the chord, which lies on or above the convex tensor peak, so it errs, if at all, towards a
smaller batch. On a GPU it settles on a simulated batch, as a reserve is not convex (answers/fit.py
on_simulated). Where every simulated batch fits and the curve stops short of the tool's batch limit, the curve
cannot say how far past it the answer lies: the answer is marked ``past_curve`` and `fit` simulates instead."""

from collections.abc import Callable
from dataclasses import replace

from generator.answers.fit import FitAnswer, answer_within, needs
from generator.answers.published import PPM, row_ppm
from generator.answers.setups import setup_name
from generator.budget import ProcessModel
from generator.matrix import batch_limit
from generator.store.fit_table import Curve


def curve_peak(curve: Curve, target: str, process: ProcessModel, qlora_ppm: int = PPM) -> Callable[[int], int]:
    """What a budget must hold at each batch of a curve (answers/fit.py needs): on a GPU its simulated reserve,
    with QLoRA's allowance on a 4-bit set-up's, plus the context; on a CPU its tensor peak through the process
    model."""
    ppm = row_ppm(curve.row.format(b=1), qlora_ppm)
    return lambda batch: needs(target, curve.at(batch), curve.cuda_at(batch), process, ppm)


def curve_answer(curve: Curve, target: str, usable: int, process: ProcessModel, qlora_ppm: int = PPM,
                 **context: str | int) -> FitAnswer:
    """The largest batch of a curve's set-up within a usable budget (answers/fit.py usable_bytes), by the
    answers' one search over the curve's peaks, settled on a simulated batch on a GPU; ``past_curve`` where the
    answer reached the curve's last batch short of the tool's limit. ``context`` fills the answer's other fields."""
    peak, limit = curve_peak(curve, target, process, qlora_ppm), batch_limit(curve.seq_len)
    settled = curve.batches if target.startswith("gpu") else None
    found = answer_within(setup_name(curve.setup), curve.row, peak, usable, limit, settled, model=curve.model,
                          parameters=curve.parameters, **context)
    last = curve.batches[-1]
    return replace(found, past_curve=found.batch >= last and last < limit)
