"""The page's context, in-process: figures and verdicts from the files, and no claim without its rows."""

from pathlib import Path

import pytest

from generator.report.article import build_context
from generator.report.render import render_markdown
from generator.store.catalog import Catalog, newest
from generator.store.layout import environments

REPO = Path(__file__).resolve().parent.parent


def committed():
    catalog = Catalog(REPO / "measurements")
    return newest([catalog.select(folder, None) for folder in environments(catalog.root)])


def test_the_capped_run_and_the_headline_come_from_the_files() -> None:
    results = list(committed().results)
    context = build_context(results)
    capped = next(r for r in results if r.row.memory_limit_bytes)
    (run,) = context.capped_runs
    assert run.row_cap_bytes == capped.row.memory_limit_bytes and run.completed_step1 and not run.row.ok
    assert run.died_in == "step 2" and "MiB (" in run.row.status_text  # the byte count, made readable
    by_id = {r.row.id: r for r in results}
    headline = context.headline
    assert headline is not None and headline.limit is not None
    assert headline.limit.n_bytes == capped.row.memory_limit_bytes
    assert headline.training.peak.n_bytes == by_id["train-b8-s256"].summary.peak_rss_bytes
    assert headline.inference.peak.n_bytes < headline.limit.n_bytes < headline.training.peak.n_bytes


def test_the_verdict_follows_the_shares(measured_folder: Path) -> None:
    from generator.store.catalog import load_folder

    """Flip the data, and the verdict flips: batch-8 training whose peak is barely above its P × 16 bytes is
    ruled by fixed costs (adapters and 16-bit first); the same row at four times that, by activations."""
    from dataclasses import replace

    results = list(load_folder(measured_folder))
    plain = next(r for r in results if r.row.id == "train-b8-s256")
    fixed = 16 * plain.model.parameters  # fp32 weights, gradients and two AdamW moments, by hand
    firsts = {}
    for scale in (1.2, 4.0):
        net = int(fixed * scale)
        summary = replace(plain.summary, net_peak_bytes=net, peak_rss_bytes=plain.summary.baseline_bytes + net)
        edited = [replace(r, summary=summary) if r is plain else r for r in results]
        verdict = build_context(edited).verdict
        assert verdict is not None
        assert verdict.fixed_share.value == pytest.approx(1 / scale)
        firsts[scale] = {c.subject.id.rsplit("-", 1)[-1] for c in verdict.first}
    assert firsts == {1.2: {"lora8", "bf16"}, 4.0: {"ckpt"}}


def test_a_few_rows_make_no_claim_they_do_not_support(measured_folder: Path) -> None:
    from generator.store.catalog import load_folder

    few = [r for r in load_folder(measured_folder) if r.row.id in ("baseline", "train-b1-s256", "infer-b1-s256")]
    context = build_context(few)
    assert context.headline is None and context.verdict is None and context.findings.fit is None
    markdown = render_markdown(context)["index.md"]
    assert "does not fit for training" not in markdown
    assert "were not both measured, so this build makes no claim" in markdown
    assert "This build lacks the rows for a rule" in markdown
