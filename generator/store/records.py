"""The records a result file holds, typed: the row's model, each repeat's figures, the row's summary, and a
simulated prediction. All memory figures are integer bytes.

A figure that every repeat records is declared once, as a field of ``Figures`` made with ``recorded()``: its
unit and how a row's repeats combine into its summary (median, max or first). ``Repeat`` and ``Summary`` both
inherit the declared fields; the summary (generator/store/summary.py), the TOML codec and ``diff`` follow from
the declarations, so a new figure is one declaration here and one assignment in the worker."""

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from generator import __version__
from generator.matrix import Mode, RowSpec
from generator.store.environment import Environment

# The file format. Older versions are brought up to this one on load (generator/store/documents.py).
#   1: method_version optional (absent meant 1); LoRA targets in [row] (older files).
#   2: method_version and method_hash at the top level; LoRA targets per repeat and in [result].
SCHEMA_VERSION = 2
# The measuring method, as asv versions a benchmark: bumped whenever the harness changes what a figure means,
# so `measure` re-measures older rows instead of skipping them and `diff` refuses to compare across methods.
#   1: every repeat of a run forked from one worker server (files without the key).
#   2: each repeat round from its own freshly started server, so repeats are independent; RssAnon and
#      RssFile recorded at the end of each phase.
#   3: generation as generate() runs it: the prompt keeps one position's logits (logits_to_keep=1), and each
#      step copies that position to fp32. Rows of other modes measure as in 2.
METHOD_VERSION = 3
# The modes each version changed: a result of an older version is still current, and comparable with one of a
# newer version, for a row whose mode no later version changed.
METHOD_CHANGES: dict[int, tuple[str, ...]] = {2: tuple(Mode), 3: (Mode.GENERATE,)}


def same_method(mode: str, first: int, second: int) -> bool:
    """Whether two method versions measure a row of this mode alike."""
    low, high = sorted((first, second))
    return all(mode not in METHOD_CHANGES.get(version, ()) for version in range(low + 1, high + 1))
STATUSES = ("ok", "oom", "killed", "timeout", "error")
STEP1_PHASES = ("forward", "backward", "optimizer", "decode")
MEDIAN, MAX, FIRST = "median", "max", "first"


class ResultsError(ValueError):
    """A result file or folder that cannot be used; the message names the file and the reason."""


def recorded(unit: str, combine: str, default: Any = 0) -> Any:
    """Declare a figure that each repeat records: its unit ('bytes', 'seconds', 'text') and how a row's
    repeats combine into the summary. A per-phase figure ({phase: value}) is declared with default=dict."""
    metadata = {"unit": unit, "combine": combine}
    if default is dict:
        return field(default_factory=dict, metadata=metadata)
    return field(default=default, metadata=metadata)


@dataclass(frozen=True, kw_only=True)
class Figures:
    """Every figure a repeat records, each declared once with its unit and how repeats combine."""

    baseline_bytes: int = recorded("bytes", MEDIAN)  # the imports, read before the model is built
    peak_rss_bytes: int = recorded("bytes", MEDIAN)  # the whole process's peak
    phase_peak_bytes: Mapping[str, int] = recorded("bytes", MEDIAN, dict)  # each phase's peak
    phase_rss_anon_bytes: Mapping[str, int] = recorded("bytes", MEDIAN, dict)  # RssAnon at each phase's end
    phase_rss_file_bytes: Mapping[str, int] = recorded("bytes", MEDIAN, dict)  # RssFile: library pages
    phase_swap_bytes: Mapping[str, int] = recorded("bytes", MAX, dict)  # VmSwap at each phase's end
    startup_seconds: float = recorded("seconds", MEDIAN, 0.0)
    load_seconds: float = recorded("seconds", MEDIAN, 0.0)
    wall_seconds: float = recorded("seconds", MEDIAN, 0.0)
    cuda_max_allocated_bytes: int = recorded("bytes", MEDIAN)  # --device cuda: torch.cuda.max_memory_allocated
    cuda_max_reserved_bytes: int = recorded("bytes", MEDIAN)  # --device cuda: torch.cuda.max_memory_reserved
    lora_targets: str = recorded("text", FIRST, "")  # the modules LoRA adapted, space-separated
    allocator_settings: str = recorded("text", FIRST, "")  # the LD_PRELOAD or glibc tunables the worker ran with


def declared() -> tuple[Any, ...]:
    """The declared figures (dataclass fields with their unit and combine rule in .metadata)."""
    return fields(Figures)


@dataclass(frozen=True)
class ModelInfo:
    """Which model a row measured and how many of its parameters trained."""

    name: str
    source: str  # "random-init" or "pretrained"
    reference: str
    config_sha256: str
    parameters: int
    trainable_parameters: int


@dataclass(frozen=True, kw_only=True)
class Repeat(Figures):
    """One fresh process's figures. Failed repeats keep what they had measured before failing."""

    status: str
    phase: str = ""  # the phase that was running when it failed
    detail: str = ""  # the exception's last line or the signal's name
    peak_method: str = ""
    step_seconds: tuple[float, ...] = ()
    parameters: int = 0  # as the worker counted them once the model was built
    trainable_parameters: int = 0

    @property
    def net_peak_bytes(self) -> int:
        """Peak minus the imports' baseline, measured in the same process."""
        return max(self.peak_rss_bytes - self.baseline_bytes, 0)

    @classmethod
    def from_figures(cls, figures: Mapping[str, object], **overrides: object) -> "Repeat":
        """The typed side of the worker's result file: its keys are this class's field names."""
        values = {spec.name: figures[spec.name] for spec in fields(cls) if spec.name in figures}
        if "step_seconds" in values:
            values["step_seconds"] = tuple(values["step_seconds"])  # type: ignore[arg-type]
        return cls(**{**values, **overrides})  # type: ignore[arg-type]


@dataclass(frozen=True, kw_only=True)
class Summary(Figures):
    """The row's figures: the declared figures combined over the repeats that finished, or the first failure."""

    status: str
    phase: str = ""
    detail: str = ""
    net_peak_bytes: int = 0
    net_peak_min_bytes: int = 0  # the spread of the independent repeats
    net_peak_max_bytes: int = 0
    repeats_note: str = ""  # why a row has fewer repeats than asked for, if it does
    steps_seconds: float = 0.0
    memory_limit_method: str = ""  # how a cap was applied: "cgroup v2 memory.max" or "RLIMIT_DATA"
    predicted_net_bytes: int = 0  # room for `predict`: 0 means no prediction was made

    @property
    def ok(self) -> bool:
        """Whether every repeat finished."""
        return self.status == "ok"

    @property
    def setup_seconds(self) -> float:
        """Start-up plus model construction: the part of a row that is not its steps."""
        return self.startup_seconds + self.load_seconds

    @property
    def setup_share(self) -> float | None:
        """Set-up as a share of the row's wall time; None when no wall time was recorded."""
        return self.setup_seconds / self.wall_seconds if self.wall_seconds > 0 else None

    def step_peaks(self) -> tuple[int, int]:
        """Whole-process peaks of step 1 (forward, backward, optimizer) and of step 2; 0 where not recorded."""
        peaks = self.phase_peak_bytes
        step1 = max((peaks[phase] for phase in STEP1_PHASES if phase in peaks), default=0)
        return step1, peaks.get("step2", 0)


@dataclass(frozen=True)
class Prediction:
    """What `predict` simulated for a row with fake tensors (generator/predict/simulate.py): tensor storage
    only. The process peak a machine shows on top of it is modelled separately (generator/budget.py)."""

    tensor_peak_bytes: int
    phase: str  # the phase that sets the tensor peak
    weights_bytes: int  # the split of the peak: parameters,
    gradients_bytes: int
    optimizer_bytes: int  # AdamW state,
    activations_bytes: int  # and activations and temporaries
    parameters: int
    trainable_parameters: int
    method: str
    seconds: float = 0.0
    lora_targets: str = ""
    phase_peak_bytes: Mapping[str, int] = field(default_factory=dict)
    # The same allocations replayed through the CUDA caching allocator's rules (generator/answers/
    # cuda_allocator.py): the bytes it would reserve, with fixed and with expandable segments. Simulated.
    cuda_reserved_bytes: int = 0
    cuda_expandable_bytes: int = 0
    # The tensor peak of the GPU's program (generator/predict/exact/cuda_program.py: CUDA's SDPA backend, its autocast
    # lists, bitsandbytes' fused update), whose allocations the two reserves above replay, and its phase.
    # 0 and '' in predictions made before it, whose reserves replayed the CPU's program.
    cuda_tensor_peak_bytes: int = 0
    cuda_phase: str = ""
    # Of the weights, what undoes a 4-bit base's quantization (block scales, their scales, maps, offsets),
    # from the real quantized storages; 0 for a base in its dtype.
    quantization_bytes: int = 0
    # The GPU's program's peak of host memory (activations offloaded, paged optimizer state in unified memory,
    # generator/predict/exact/cuda_program.py): apart from its device peak, which max_memory_allocated counts.
    cuda_host_bytes: int = 0


@dataclass(frozen=True)
class CpuPart:
    """The CPU program's part of a simulated row (Prediction's fields of the same names): its tensor peak, the
    phase and split of it, each phase's peak, and the model's counts. Kept apart from CUDA's part, so that a
    question about one target (fit --target cpu) simulates one program."""

    tensor_peak_bytes: int
    phase: str
    weights_bytes: int
    gradients_bytes: int
    optimizer_bytes: int
    activations_bytes: int
    parameters: int
    trainable_parameters: int
    method: str
    seconds: float = 0.0
    lora_targets: str = ""
    phase_peak_bytes: Mapping[str, int] = field(default_factory=dict)
    quantization_bytes: int = 0


@dataclass(frozen=True)
class CudaPart:
    """The CUDA program's part of a simulated row (Prediction's fields of the same names): its tensor peak and
    phase, the caching allocator's reserves replaying it, and the model's counts. The reserve with expandable
    segments is None where it was not replayed: a question about the default allocator alone (fit --target gpu)
    does not ask for it."""

    cuda_tensor_peak_bytes: int
    cuda_phase: str
    cuda_reserved_bytes: int
    parameters: int
    trainable_parameters: int
    method: str
    seconds: float = 0.0
    lora_targets: str = ""
    quantization_bytes: int = 0
    cuda_expandable_bytes: int | None = None
    cuda_host_bytes: int = 0


def joined(cpu: CpuPart, cuda: CudaPart) -> Prediction:
    """The whole prediction of a row from its two programs' parts (the counts are the model's, the same in
    both; the seconds are both simulations'); the CUDA part must hold both of its reserves."""
    if cuda.cuda_expandable_bytes is None:
        raise ValueError("a CUDA part without its expandable-segments reserve makes no whole prediction")
    return Prediction(**{**vars(cuda), **vars(cpu), "seconds": cpu.seconds + cuda.seconds})


@dataclass(frozen=True)
class RowResult:
    """Everything one result file holds."""

    row: RowSpec
    model: ModelInfo
    environment: Environment
    summary: Summary
    repeats: tuple[Repeat, ...]
    measured_at: str
    tool_version: str = __version__
    schema_version: int = SCHEMA_VERSION
    method_version: int = METHOD_VERSION
    method_hash: str = ""  # the measuring code's hash (generator/measure/method.py); '' in older files
    prediction: Prediction | None = None  # [prediction]: simulated, never mixed into the measured [result]

    @property
    def file_name(self) -> str:
        """The file name follows from the row's coordinates."""
        return f"{self.row.id}.toml"

    @property
    def finished(self) -> bool:
        """A measured row that finished, uncapped: one a fit or a spread can use."""
        return self.summary.ok and self.row.mode != Mode.BASELINE and not self.row.memory_limit_bytes
