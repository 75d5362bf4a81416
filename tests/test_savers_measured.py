"""Each memory saver's simulated peak holds a real run of the same algorithm on the CPU under glibc-tuned: the
committed rows of every saver, predicted by the process model fitted on the same machine's plain full fine-tunes
only (out of sample), land within 5 %."""

from conftest import TESTS

from generator.answers.accuracy import WITHIN, judged_on_plain_rows
from generator.budget import process_model
from generator.matrix import Mode, RowSpec, parse_row
from generator.store import layout
from generator.store.catalog import Catalog

MEASUREMENTS = TESTS.parent / "measurements"
# What each saver turns on in a row, and a row of the matrix that has it
SAVERS = {"chunked cross-entropy": lambda row: row.loss == "chunked",
          "fused linear cross-entropy": lambda row: row.loss == "fused",
          "activation offloading": lambda row: row.offload,
          "optimizer in backward": lambda row: row.optimizer_in_backward,
          "paged 8-bit AdamW": lambda row: row.optimizer == "paged_adamw8bit",
          "LoRA on all linear layers": lambda row: row.lora_all_linear,
          "LoRA with checkpointing": lambda row: row.lora_rank and row.gradient_checkpointing,
          "QLoRA with checkpointing": lambda row: row.quantization and row.gradient_checkpointing}


def _judged():
    catalog = Catalog(MEASUREMENTS)
    return [j for folder in layout.environments(catalog.root)
            for j in judged_on_plain_rows(catalog.every_result(folder), "glibc-tuned")]


def test_every_saver_is_checked_against_a_real_run_within_five_percent() -> None:
    judged = _judged()
    for name, on in SAVERS.items():
        rows = [j for j in judged if on(parse_row(j.row))]
        assert rows, f"no measured row of {name} under glibc-tuned"
        for j in rows:
            assert abs(j.out_of_sample_error) <= WITHIN, (name, j.row, j.out_of_sample_error)  # type: ignore[arg-type]


def test_the_judging_line_is_fitted_on_plain_rows_only() -> None:
    """A judged row never informs its own prediction: the line is the one fitted, by hand here, on the same
    environment's full fine-tunes with nothing on."""
    catalog = Catalog(MEASUREMENTS)
    checked = 0
    for folder in layout.environments(catalog.root):
        results = [r for r in catalog.every_result(folder) if r.prediction and r.finished
                   and r.row.allocator == "glibc-tuned"]
        plain = [r for r in results if r.row == RowSpec(Mode.TRAIN, r.row.batch_size, r.row.seq_len,
                                                        allocator="glibc-tuned")]
        judged = judged_on_plain_rows(catalog.every_result(folder), "glibc-tuned")
        if not judged:
            continue
        line = process_model([(r.prediction.tensor_peak_bytes, r.summary.net_peak_bytes) for r in plain], "")
        assert {j.row for j in judged}.isdisjoint({r.row.id for r in plain}) and len(plain) >= 3
        for j in judged:
            assert j.out_of_sample_bytes == line.expected(j.tensor_bytes)
            checked += 1
    assert checked
