"""What a GPU has confirmed of the simulated GPU figures: the GPU kit's environment (`memory-budget gpu`,
generator/cli/gpu_kit.py), read as the pages show it.

Each uncapped GPU row sets the simulated caching-allocator reserve (its recorded prediction, simulated on the
machine that measured it) beside ``torch.cuda.max_memory_reserved``; each capped row is one of the fit page's
answers, run at its batch with the allocator held to the card less the measured context: it ran, or it ran out
of memory. The context measured there is set beside the documented allowance. Without such an environment,
every GPU figure is simulated and the pages say so."""

import statistics
from dataclasses import dataclass
from pathlib import Path

from generator.answers.cuda_allocator import CUDA_CONTEXT_BYTES
from generator.matrix import Mode
from generator.store import gpu_context, layout
from generator.store.catalog import Catalog
from generator.store.gpu_context import GpuContext
from generator.store.records import RowResult
from generator.units import format_mib, signed_percent

WITHIN = 0.05  # the kit's goal: reserves within 5 %


@dataclass(frozen=True)
class ValidatedRow:
    """One GPU row: the simulated reserve and the measured one (both bytes of the caching allocator)."""

    model: str
    row: str
    simulated_bytes: int
    measured_bytes: int

    @property
    def error(self) -> float:
        """The simulation's error, as a share of the measured reserve."""
        return self.simulated_bytes / self.measured_bytes - 1


@dataclass(frozen=True)
class CheckedAnswer:
    """One fit-page answer run on the device under the card's cap."""

    model: str
    row: str
    cap_bytes: int
    ran: bool  # False: it ran out of memory (or failed otherwise, see status)
    status: str


@dataclass(frozen=True)
class GpuValidation:
    """A GPU environment's confirmations."""

    environment: str
    device_name: str
    context: GpuContext | None
    rows: tuple[ValidatedRow, ...]
    answers: tuple[CheckedAnswer, ...]

    @property
    def median_error(self) -> float:
        return statistics.median(abs(r.error) for r in self.rows) if self.rows else 0.0

    @property
    def within(self) -> int:
        return sum(abs(r.error) <= WITHIN for r in self.rows)


def _validated(result: RowResult) -> ValidatedRow | None:
    if not (result.finished and result.prediction and result.summary.cuda_max_reserved_bytes):
        return None
    return ValidatedRow(result.model.name, result.row.id, result.prediction.cuda_reserved_bytes,
                        result.summary.cuda_max_reserved_bytes)


def _checked(result: RowResult) -> CheckedAnswer | None:
    if not result.row.memory_limit_bytes or result.row.mode == Mode.BASELINE:
        return None
    return CheckedAnswer(result.model.name, result.row.with_limit(0).id, result.row.memory_limit_bytes,
                         result.summary.ok, result.summary.status)


def gpu_validation(catalog: Catalog) -> GpuValidation | None:
    """The newest GPU environment's confirmations, None where no GPU environment holds a row."""
    folders = [f for f in layout.environments(catalog.root) if f.name.startswith("cuda-")]
    found = [(folder, results) for folder in folders if (results := catalog.every_result(folder))]
    if not found:
        return None
    folder, results = max(found, key=lambda item: max(r.measured_at for r in item[1]))
    return _validation(folder, results)


def _validation(folder: Path, results: list[RowResult]) -> GpuValidation:
    ordered = sorted(results, key=lambda r: (r.model.name, r.row.id))
    return GpuValidation(environment=folder.name, device_name=results[0].environment.device_name,
                         context=gpu_context.load(folder),
                         rows=tuple(v for r in ordered if (v := _validated(r)) is not None),
                         answers=tuple(c for r in ordered if (c := _checked(r)) is not None))


def first_screen_line(validation: GpuValidation | None) -> str:
    """The sentence that says which GPU figures are simulated and which a device confirmed."""
    if validation is None or not (validation.rows or validation.answers):
        return ("Every GPU figure here is simulated (the caching allocator replayed over a simulation of CUDA's "
                "program); none has been validated on a device yet.")
    refuted = sum(not a.ran for a in validation.answers)
    parts = [f"{len(validation.rows)} rows of the GPU kit were measured on {validation.device_name}"]
    if validation.rows:
        parts[0] += (f": the simulated reserve lies within {signed_percent(WITHIN, 0).lstrip('+')} of the "
                     f"measured one on {validation.within} of them (median error "
                     f"{validation.median_error * 100:.1f} %)")
    if validation.answers:
        parts.append(f"{len(validation.answers) - refuted} of {len(validation.answers)} fit answers checked there "
                     f"ran at their batch{'' if not refuted else f', and {refuted} ran out of memory'}")
    return ("GPU figures are simulated; " + "; ".join(parts) + ". The fit page lists each, as simulated against "
            "measured.")


def context_line(validation: GpuValidation | None) -> str:
    """The measured context beside the documented allowance ('' without a measurement)."""
    context = validation.context if validation else None
    if context is None or context.context_bytes < 0:
        return ""
    return (f"On {context.device_name} the context measured {format_mib(context.context_bytes)}, and "
            f"{format_mib(context.context_with_kernels_bytes)} with cuBLAS's kernels and workspaces loaded "
            f"({context.module_loading}; torch {context.torch}, CUDA {context.cuda}), against the "
            f"{format_mib(CUDA_CONTEXT_BYTES)} allowed.")


def validated_cells(validation: GpuValidation | None) -> tuple[tuple[str, ...], ...]:
    """The fit page's table: each row's simulated reserve against the measured one, with the error."""
    if validation is None:
        return ()
    return tuple((r.model, r.row, format_mib(r.simulated_bytes), format_mib(r.measured_bytes),
                  signed_percent(r.error)) for r in validation.rows)


def checked_cells(validation: GpuValidation | None) -> tuple[tuple[str, ...], ...]:
    """The fit page's answers run on the device: the row at the answer's batch, the cap, and the outcome."""
    if validation is None:
        return ()
    outcome = {True: "ran: the answer holds", False: "ran out of memory: the answer is wrong"}
    return tuple((a.model, a.row, format_mib(a.cap_bytes),
                  outcome[a.ran] if a.ran or a.status == "oom" else f"failed ({a.status})")
                 for a in validation.answers)
