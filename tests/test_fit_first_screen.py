"""The fit page answers on its first screen: each config's answers on the likely card, linked to its tables, and
a legend that states every set-up's precision and recipe (figures by hand)."""

from generator.budget import ProcessModel
from generator.report.fit_page import build_fit_page
from generator.report.render import render_page
from generator.store.fit_table import Curve, FitTable

GIB = 2**30
CONTEXT = 287_047_680 + 2 * 32 * 2**20  # the documented context and two cuBLAS workspaces: 0.33 GiB


def _curve(kind: str, row: str, per_batch: int) -> Curve:
    """A straight curve simulated at 1, 2, 10 and 11: at the 24 GiB card it holds the batch fit finds (10) and
    the one after it, as the page's curves do, so the GPU answer is that batch."""
    batches = (1, 2, 10, 11)
    return Curve(model="Big", config_sha256="x", parameters=1_000, setup=kind, row=row, batches=batches,
                 tensor_bytes=tuple(b * per_batch for b in batches), cuda_bytes=tuple(b * per_batch for b in batches))


def test_the_first_screen_answers_on_the_likely_card_and_the_legend_states_each_set_up() -> None:
    # On 24 GiB less 10 %, 21.6 GiB usable: 2 GiB a sequence plus the 0.33 GiB context fits 10 (20.3 GiB), and
    # 30 GiB a sequence does not fit at batch 1 (30.3 GiB).
    table = FitTable(libraries="l", environment="e", seq_len=1024, example=(),
                     curves=(_curve("generation", "gen-b{b}-s1024-n32-bf16", 2 * GIB),
                             _curve("full training", "train-b{b}-s1024", 30 * GIB)))
    context = build_fit_page(table, [], ProcessModel(0.0, 0.0, 0, ""), "e", "l")
    (line,) = context.first
    assert line.model == "Big" and line.anchor == "big-1000-parameters"
    assert line.answers == (("full training", "does not fit: 30.3 > 21.6 GiB"),
                            ("generation", "batch 10 (20.3 GiB)"))
    assert [name for name, _ in context.legend] == ["generation", "full training"]  # declared order
    assert "32 new tokens with the KV cache" in dict(context.legend)["generation"]
    page = render_page("fit", context)["fit.md"]
    first, tables = page.index("**On a 24 GiB card**"), page.index("## Big (1,000 parameters)")
    assert first < page.index("**The set-ups**") < tables
    assert "- [Big](#big-1000-parameters): full training does not fit" in page
