"""The fit page's answer for a large model on several cards: each set-up and sharding stage's largest batch per
card on an 80 GiB GPU, read from one card's simulated curves (fit_table.FitTable.sharded) by the GPU tables'
own rule: the simulated caching-allocator reserve plus the context allowance, within the budget less the
stated margin."""

from dataclasses import dataclass

from generator.answers.fit import SHARDED_CARD_GIB, STATED_MARGIN, FitAnswer, answer_within, card_needs, usable_bytes
from generator.answers.setups import SHARDING_NAMES, setup_name
from generator.matrix import batch_limit, parse_row
from generator.report.fit_first import cell
from generator.store.fit_table import Curve, FitTable
from generator.units import GIB, format_gib

CARD_BYTES = SHARDED_CARD_GIB * GIB


@dataclass(frozen=True)
class ShardedRow:
    """One set-up under one sharding stage."""

    kind: str
    stage: str  # SHARDING_NAMES' words
    gpus: int
    answer: str  # fit_page.cell: 'batch 3 (71.0 GiB)' or 'does not fit: …'
    global_batch: str  # the batch every card together runs: '24 sequences', or '–'


@dataclass(frozen=True)
class ShardedSection:
    """The model, the cards and a row per set-up and stage."""

    model: str
    parameters_text: str
    gpus: tuple[int, ...]  # the numbers of cards the rows are for, fewest first
    card: str  # '80 GiB'
    usable: str
    rows: tuple[ShardedRow, ...]


def _answer(curve: Curve, seq_len: int) -> FitAnswer:
    def peak(batch: int) -> int:
        return card_needs(curve.cuda_at(batch))

    usable, limit = usable_bytes(CARD_BYTES, STATED_MARGIN), batch_limit(seq_len)
    return answer_within(setup_name(curve.setup), curve.row, peak, usable, limit, curve.batches, model=curve.model,
                         parameters=curve.parameters, budget_bytes=CARD_BYTES)


def sharded_section(table: FitTable | None) -> ShardedSection | None:
    """The section, where the table holds sharded curves."""
    if table is None or not table.sharded:
        return None
    rows = []
    for curve in table.sharded:
        row = parse_row(curve.row.format(b=1))
        answer = _answer(curve, table.seq_len)
        rows.append(ShardedRow(kind=setup_name(curve.setup), stage=SHARDING_NAMES[row.sharding], gpus=row.gpus,
                               answer=cell(answer),
                               global_batch=f"{answer.batch * row.gpus:,} sequences" if answer.batch else "–"))
    first = table.sharded[0]
    return ShardedSection(model=first.model, parameters_text=f"{first.parameters:,}",
                          gpus=tuple(sorted({r.gpus for r in rows})),
                          card=format_gib(CARD_BYTES, 0), usable=format_gib(usable_bytes(CARD_BYTES, STATED_MARGIN)),
                          rows=tuple(rows))
