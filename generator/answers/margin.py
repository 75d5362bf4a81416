"""fit's default margin, one rule beside the process model's (answers/overhead.py), torch-free: on a CPU, the band
the out-of-sample errors support where the process model comes from, widened where that model is another
release's; on a GPU, or where no band was validated, the stated 10 %."""

from pathlib import Path

from generator.answers.accuracy import accuracy
from generator.answers.fit import STATED_MARGIN
from generator.answers.overhead import OverheadSource, overhead_source, same_library_folders
from generator.store.catalog import Catalog
from generator.store.environment import Environment
from generator.store.layout import environments, reading_root


def validated_margin(measurements: Path, allocator: str, target: str, here: Environment) -> tuple[float, str]:
    """The margin for answers on ``here`` and why: this machine's band, else the widest band of the environments
    with its library versions, else the nearest release's band widened by its spread, else the widest band any
    environment validated (no process model to lean on)."""
    if target != "cpu":
        return STATED_MARGIN, "the stated margin for a GPU; the allocator model is not validated on a device"
    root, note = reading_root(measurements)
    catalog = Catalog(root)
    source = overhead_source(catalog, here, allocator)
    if source is None:
        return _widest(catalog, environments(root) if root.is_dir() else [], allocator, note)
    folders = same_library_folders(catalog, here) if source.borrowed and not source.release else [source.folder]
    judged = _bands(catalog, folders, allocator)
    if not judged:
        return STATED_MARGIN, f"the stated margin; no out-of-sample band under {allocator} on this machine yet{note}"
    margin, rows, folder = max(judged, key=lambda item: (item[0], item[2].name))
    why = f"the band that {rows} rows measured under {allocator}, each predicted by a model fitted without its own " \
          "model, never exceeded"
    if source.release:
        return _widened(margin, source, why, note)
    where = (f", the widest of the environments with this machine's library versions ({folder.name}); this "
             "machine has no rows of its own") if source.borrowed else ""
    return margin, why + where + note


def _bands(catalog: Catalog, folders: list[Path], allocator: str) -> list[tuple[float, int, Path]]:
    """Each folder's validated band under the allocator, with the rows it was judged on."""
    found = [(accuracy(catalog.every_result(folder), allocator), folder) for folder in folders]
    return [(band.margin, len(band.errors()), folder) for band, folder in found
            if band is not None and band.margin is not None]


def _widened(margin: float, source: OverheadSource, why: str, note: str) -> tuple[float, str]:
    """A borrowed release's band, widened so that a row as far over that model as another release's rows were
    still fits: the usable budget shrinks by 1 + spread."""
    widened = 1 - (1 - margin) / (1 + source.spread)
    return widened, (f"{why} in {source.folder.name} (transformers {source.release}, the nearest measured "
                     f"release), widened by the {source.spread:.1%} its model fell short of other releases' rows{note}")


def _widest(catalog: Catalog, folders: list[Path], allocator: str, note: str) -> tuple[float, str]:
    """No process model anywhere for this allocator: the widest band any environment validated, or the stated
    margin where none did."""
    judged = _bands(catalog, folders, allocator)
    if not judged:
        return STATED_MARGIN, f"the stated margin; no out-of-sample band under {allocator} anywhere yet{note}"
    margin, _, folder = max(judged, key=lambda item: (item[0], item[2].name))
    return margin, (f"the widest band any environment validated ({folder.name}): no rows under {allocator} to "
                    f"model this machine's overhead on, so answers are the tensor peak{note}")
