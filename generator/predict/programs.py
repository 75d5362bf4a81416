"""The CPU's program against the GPU's, for every shipped config and set-up: the tensor peak each simulation
gives at batch 1 and the site's length, their difference, and what makes it (generator/predict/exact/cuda_program.py):
the SDPA backend CUDA picks, measured by a run with that decision alone, and the rest (CUDA autocast's lists for
mixed precision, the optimizers' updates as CUDA runs them: bitsandbytes' fused 8-bit kernel, AdamW's foreach).
`python -m generator.predict.programs [MODEL ...]` prints the table as Markdown; the figures are simulated tensor
peaks, not reserves."""

import sys
from dataclasses import dataclass

from generator.answers.setups import KINDS
from generator.matrix import Mode, parse_row
from generator.model_source import SHIPPED_MODELS, resolve_model
from generator.predict.curves import SITE_SEQ_LEN
from generator.predict.exact import cuda_program
from generator.predict.fast.small_depths import fast_run as _run
from generator.units import format_mib


@dataclass(frozen=True)
class ProgramRow:
    """One config and set-up's tensor peaks under the two programs, and the SDPA-only run between them."""

    model: str
    kind: str
    row: str
    cpu_bytes: int
    cuda_bytes: int
    sdpa_only_bytes: int
    backends: str  # the CUDA program's SDPA calls by backend, 'flash × 60'


def compare(model: str, kind: str, seq_len: int = SITE_SEQ_LEN) -> ProgramRow:
    """Simulate one set-up at batch 1 as the CPU runs it, as CUDA runs it, and with CUDA's SDPA alone."""
    row, source = parse_row(KINDS[kind].replace("{s}", str(seq_len)).format(b=1)), resolve_model(model)
    peaks = {"cpu": _run(row, source, cuda_program.CPU)[0].peak}
    cuda_program.BACKENDS_CHOSEN.clear()
    peaks["cuda"] = _run(row, source, cuda_program.CUDA)[0].peak
    chosen = ", ".join(f"{backend} × {count}" for backend, count in sorted(cuda_program.BACKENDS_CHOSEN.items()))
    # CUDA's autocast acts on mixed-precision rows only, its optimizer updates on training rows only: elsewhere
    # the SDPA-only program is the CUDA program itself
    peaks["sdpa"] = (_run(row, source, cuda_program.CUDA_SDPA_ONLY)[0].peak
                     if row.mode == Mode.TRAIN else peaks["cuda"])
    return ProgramRow(model=source.name, kind=kind, row=row.id, cpu_bytes=peaks["cpu"], cuda_bytes=peaks["cuda"],
                      sdpa_only_bytes=peaks["sdpa"], backends=chosen)


def _signed_mib(n_bytes: int) -> str:
    return ("+" if n_bytes > 0 else "−" if n_bytes < 0 else "±") + format_mib(abs(n_bytes))


def markdown(rows: list[ProgramRow]) -> str:
    """The table: tensor peaks of both programs, the difference, and its parts."""
    lines = ["| Config | Set-up | Row | CPU program | CUDA program | Difference | From SDPA | From the rest "
             "| CUDA's SDPA calls |", "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r.model} | {r.kind} | `{r.row}` | {format_mib(r.cpu_bytes)} | {format_mib(r.cuda_bytes)} "
                     f"| {_signed_mib(r.cuda_bytes - r.cpu_bytes)} | {_signed_mib(r.sdpa_only_bytes - r.cpu_bytes)} "
                     f"| {_signed_mib(r.cuda_bytes - r.sdpa_only_bytes)} | {r.backends or 'none'} |")
    return "\n".join(lines)


def main(models: list[str]) -> None:
    rows = [compare(model, kind) for model in models or list(SHIPPED_MODELS) for kind in KINDS]
    print(markdown(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
