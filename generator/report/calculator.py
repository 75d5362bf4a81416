"""The fit page's calculator: the recorded curves and the page's own answer rules, as data for a few lines of
plain JavaScript (templates/calculator.js) that answer any card or budget in the reader's browser, offline.

It reads the curves by the same chord and the same largest-batch search as the tables (generator/store/
fit_table.py, generator/answers/fit.py), settles a GPU answer on a simulated batch as they do, and takes the same
margins, process model and CUDA context allowance, so its answer for a budget the tables list is the table's
cell; the browser test checks it over a grid of choices against this module's Python answers. Integers travel
as decimal strings, which the script reads as BigInt."""

import json
from dataclasses import dataclass

from markupsafe import Markup

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.answers.published import PPM, row_ppm
from generator.answers.setups import RECIPES, setup_name
from generator.budget import ProcessModel
from generator.matrix import batch_limit
from generator.store.fit_table import Curve, FitTable
from generator.store.recorded_curves import RecordedCurves

TYPED_GIB = (0.5, 4096.0)  # the budgets a reader may type, in GiB, the smallest also the step


@dataclass(frozen=True)
class CalculatorData:
    """What the script needs, as one JSON document."""

    text: str

    def script_json(self) -> Markup:
        """The document, safe inside <script type="application/json">: no '<', '>' or '&' can end it."""
        return Markup(self.text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


def offered(table: FitTable, recorded: tuple[RecordedCurves, ...]) -> tuple[Curve, ...]:
    """The curves the calculator offers: the shipped configs', then those recorded with `fit --model X
    --record`, less any the shipped table holds."""
    shipped = (*table.curves, *table.other_lengths)
    held = {(curve.model, curve.setup, curve.seq_len) for curve in shipped}
    return (*shipped, *(curve for found in recorded for curve in found.curves
                        if (curve.model, curve.setup, curve.seq_len) not in held))


def calculator_data(table: FitTable, recorded: tuple[RecordedCurves, ...], process: ProcessModel,
                    margins: dict[str, float], cards: tuple[int, ...], card: int,
                    qlora_ppm: int = PPM) -> CalculatorData:
    """The curves of every config, set-up and length (offered), each with the allowance on its GPU reserve per
    million (QLoRA's, ``qlora_ppm``, on a 4-bit set-up), the rules the tables answer by (margins by target), the
    cards offered and the one chosen first, in GiB, and the length chosen first (the tables')."""
    curves = [{"model": curve.model, "kind": (name := setup_name(curve.setup)), "recipe": RECIPES.get(name, ""),
               "row": curve.row, "seq": curve.seq_len, "limit": str(batch_limit(curve.seq_len)),
               "batches": [str(b) for b in curve.batches],
               "tensor": [str(v) for v in curve.tensor_bytes], "cuda": [str(v) for v in curve.cuda_bytes],
               "allowance": str(row_ppm(curve.row.format(b=1), qlora_ppm))}
              for curve in offered(table, recorded)]
    document = {"curves": curves, "seq_len": table.seq_len, "ppm": str(PPM),
                "context": str(CUDA_CONTEXT_BYTES), "proportional": process.proportional, "fixed": process.fixed,
                "margins": margins, "cards": list(cards), "card": card, "typed": list(TYPED_GIB)}
    return CalculatorData(json.dumps(document, sort_keys=True, separators=(",", ":")))
