"""How `fit` reports: a table per budget for people, JSON for scripts (--confirm's measurements: cli/confirm.py)."""

import json
from dataclasses import asdict
from importlib import metadata

from generator.answers.fit import FitAnswer
from generator.answers.published import PPM, is_qlora
from generator.answers.setups import BY_NAME, RECIPES, with_words
from generator.budget import ProcessModel
from generator.escaping import plain_terminal_text
from generator.matrix import parse_row
from generator.predict.fit import overhead_text
from generator.units import format_mib, format_mib_above, format_size

TARGET_WORDS = {"cpu": "on a CPU", "gpu": "on a GPU", "gpu-expandable": "on a GPU with expandable segments"}


def cards_text(sharding: tuple[str, int] | None) -> str:
    """', each training set-up one card of 8 under zero3 (its batch is that card's)', or nothing."""
    if sharding is None:
        return ""
    return (f", each training set-up one card of {sharding[1]} under {sharding[0]} (its batch is that card's; "
            "sharding is arithmetic on the simulated storages, not validated on a device)")


def render_text(answers: list[FitAnswer], model: str, budget: int, margin: float, process: ProcessModel,
                target: str = "cpu", sharding: tuple[str, int] | None = None, extra: tuple[str, ...] = ()) -> str:
    """'full training: batch 12 (5.9 GiB; batch 13 needs 6.4 GiB)' per kind."""
    parameters = next((a.parameters for a in answers if a.parameters), 0)
    added = f", every training set-up with {', '.join(with_words(extra))} (--with)" if extra else ""
    lines = [f"{model} ({parameters:,} parameters) in {format_size(budget)} {TARGET_WORDS[target]}, "
             f"{parse_row(answers[0].row).seq_len:,} tokens a sequence, {margin:.0%} kept free: "
             f"{format_size(answers[0].usable_bytes)} usable{cards_text(sharding)}{added}"]
    for answer in answers:
        kind = f"{answer.kind} ({RECIPES.get(answer.kind, answer.row)}{library_text(answer.kind, '; ')})"
        if answer.error:
            lines.append(f"  {kind}: not simulated: {answer.error}")
            continue
        if answer.batch == 0:
            lines.append(f"  {kind}: does not fit; batch 1 needs "
                         f"{format_mib_above(answer.predicted_bytes, answer.usable_bytes)}")
            continue
        following = (f"batch {answer.batch + 1} needs {format_mib_above(answer.next_bytes, answer.usable_bytes)}"
                     if answer.next_bytes else "the largest batch the tool simulates")
        host = (f"; and {format_mib(answer.host_bytes)} of host memory beside the card (paged optimizer state, "
                "offloaded activations)" if answer.host_bytes else "")
        lines.append(f"  {kind}: batch {answer.batch} ({answer.row}, {format_mib(answer.predicted_bytes)}; "
                     f"{following}{host})")
    lines.append(f"  {overhead_text(process, target)}")
    lines += [f"  {line}" for line in allowance_lines(answers, target) + read_lines(answers)]
    return "".join(plain_terminal_text(line) + "\n" for line in lines)  # a model's name is data


def library_text(kind: str, before: str = "") -> str:
    """The installed version of the library a set-up needs beyond torch, transformers and peft ('bitsandbytes
    0.50.2'), after ``before``; '' for one that needs none. Another bitsandbytes is another program."""
    setup = BY_NAME.get(kind)
    if setup is None or not setup.library:
        return ""
    try:
        return f"{before}{setup.library} {metadata.version(setup.library)}"
    except metadata.PackageNotFoundError:
        return f"{before}{setup.library} not installed"


def allowance_lines(answers: list[FitAnswer], target: str) -> list[str]:
    """How QLoRA's GPU answers were made: with the allowance the published peaks set, or without one."""
    if not target.startswith("gpu"):
        return []
    quantized = [answer for answer in answers if is_qlora(answer.row)]
    with_allowance = [answer for answer in quantized if answer.allowance_ppm != PPM]
    if with_allowance:
        factor = with_allowance[0].allowance_ppm / PPM
        return [f"QLoRA: the simulated reserve x{factor:.3f}, QLoRA's allowance: the largest factor by which a "
                "published QLoRA peak exceeded its simulation (`memory-budget published`, the site's published page)"]
    return ["QLoRA: no published-figures suite was found to set its allowance; its answer is the bare "
            "simulation, which fell short of published QLoRA peaks by up to a fifth"] if quantized else []


def read_lines(answers: list[FitAnswer]) -> list[str]:
    """Which answers were read from a recorded curve rather than simulated, and from which file."""
    read = [answer.kind for answer in answers if answer.read_from]
    files = ", ".join(dict.fromkeys(answer.read_from for answer in answers if answer.read_from))
    return [f"read from the curves recorded in {files}, by the fit page's rule, without simulating: "
            f"{', '.join(read)} (--simulate simulates them)"] if read else []


def render_json(answers: list[FitAnswer], model: str, budget: int, margin: float, process: ProcessModel,
                target: str = "cpu", sharding: tuple[str, int] | None = None, extra: tuple[str, ...] = ()) -> str:
    """One object per kind."""
    return json.dumps([{**asdict(answer), "model": model, "budget_bytes": budget, "margin": margin,
                        "with": list(extra),
                        "setup": RECIPES.get(answer.kind, ""), "library": library_text(answer.kind),
                        "target": target,
                        "sharding": sharding[0] if sharding else "", "gpus": sharding[1] if sharding else 1,
                        "overhead": overhead_text(process, target)}
                       for answer in answers],
                      indent=2, sort_keys=True) + "\n"
