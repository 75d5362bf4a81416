"""What a "will it fit?" answer is: the largest batch of a set-up within a budget, and what a budget must hold for
a row on each target. predict searches for it (generator/predict/fit.py); report places it."""

from dataclasses import dataclass

from generator.budget import CUDA_CONTEXT_BYTES, ProcessModel
from generator.store.records import Prediction


@dataclass(frozen=True)
class FitAnswer:
    """The largest batch of one kind that fits a budget, with the predictions either side of the edge."""

    kind: str
    row: str  # the row at the answer (or at batch 1 when nothing fits)
    batch: int  # 0: not even batch 1 fits
    predicted_bytes: int  # net peak (CPU) or reserve plus context (GPU) at that batch (batch 1 if none fits)
    next_bytes: int  # at batch + 1; 0 when the search stopped at the largest batch the tool allows
    usable_bytes: int
    simulations: int
    model: str = ""
    parameters: int = 0
    budget_bytes: int = 0
    error: str = ""  # why this kind could not be simulated ('' when it was)


def needs(target: str, tensor_bytes: int, reserved_bytes: int, model: ProcessModel) -> int:
    """What a budget must hold, the one rule every answer uses: on a CPU the process peak net of imports (the
    tensor peak through the process model); on a GPU the caching allocator's simulated reserve plus the stated
    context allowance (the CPU's overhead does not carry over)."""
    return reserved_bytes + CUDA_CONTEXT_BYTES if target.startswith("gpu") else model.expected(tensor_bytes)


def expected_peak(prediction: Prediction, model: ProcessModel, target: str) -> int:
    """needs() for a simulated row; "gpu-expandable" reads the reserve with expandable segments."""
    reserved = prediction.cuda_expandable_bytes if target == "gpu-expandable" else prediction.cuda_reserved_bytes
    return needs(target, prediction.tensor_peak_bytes, reserved, model)
