"""The bytes of live tensor storage through a simulation, by category and phase (simulate.py drives it).

Everything it learns is one of four journal entries, applied and recorded in the same step: a storage made
(its key, bytes and what it is), a storage found to be something else (a gradient, optimizer state, a weight),
a storage freed, and a phase entered. Its figures (the tensor peak, the phase that sets it and its split, each
phase's peak, and the trace the allocator models replay) come from those entries alone, so a journal replayed
(``StorageTracker.replay``) gives the figures of the run that wrote it; the depth fast path (depth.py) replays
the journal it extends."""

import functools
import weakref
from typing import Any

from generator.categories import CATEGORIES

HOST = "host"  # a storage of host memory in a GPU's program (offloaded activations, paged optimizer state):
# counted apart (host_peak), never in the device's totals, peak or trace


class StorageTracker:
    """Bytes of live tensor storage, by category and phase. It follows a simulation from inside its
    FakeTensorMode (fake_mode.py), a run of real tensors through a dispatch mode (``mode()``)."""

    def __init__(self) -> None:
        self.sizes: dict[object, int] = {}
        self.kinds: dict[object, str] = {}
        self.totals = dict.fromkeys(CATEGORIES, 0)
        self.total = self.peak = self.phase_max = 0
        self.peak_split = dict(self.totals)
        self.phase = self.peak_phase = "load"
        self.phase_peaks: dict[str, int] = {}
        self.events: list[tuple[object, int, bool]] = []  # (storage, bytes, made or freed), for allocator models
        self.event_kinds: dict[int, str] = {}  # a made event's index -> what its storage turned out to be
        self.made_at: dict[object, int] = {}  # a live storage -> the index of its made event
        self.phase_marks: list[tuple[int, str]] = []  # (index of the next event, phase entered), for replays
        self.journal: list[tuple[Any, ...]] = []  # ("made", key, bytes, kind) | ("kind", key, kind) |
        # ("freed", key) | ("phase", name), in order
        self.finished = False  # after finish(), what the run left is freed whenever Python's collector gets to it
        self.making = "activations"  # what an operator's new storage is: optimizer state during a GPU's update
        # (cuda_program.foreach_updates), host memory while a GPU's program makes some (HOST), else activations
        # and temporaries until found to be something else
        self.host_total = self.host_peak = 0

    @classmethod
    def replay(cls, journal: list[tuple[Any, ...]]) -> "StorageTracker":
        """A tracker that has been through these entries, finished: replayed as far as it is read (Replayed)."""
        return Replayed(journal)

    @classmethod
    def replay_whole(cls, journal: list[tuple[Any, ...]]) -> "StorageTracker":
        """A tracker that has been through these entries, every one applied, finished."""
        tracker = cls()
        made, kind, freed, enter = tracker.made, tracker.kind, tracker.freed, tracker.enter
        for entry in journal:  # the commonest first: a replay of a deep model's journal walks a hundred thousand
            tag = entry[0]
            if tag == "made":
                made(entry[1], entry[2], entry[3])
            elif tag == "freed":
                freed(entry[1])
            elif tag == "kind":
                kind(entry[1], entry[2])
            else:
                enter(entry[1])
        tracker.finish()
        return tracker

    def track(self, tensor: Any, kind: str = "activations") -> None:
        """Count a tensor's storage once, from now until it is freed."""
        storage = tensor.untyped_storage()
        key = id(storage)
        if key in self.sizes:
            return
        self.made(key, storage.nbytes(), kind)
        weakref.finalize(storage, self.freed, key)

    def classify(self, tensor: Any, kind: str) -> None:
        """Say what a live tensor is (a gradient, optimizer state, a weight)."""
        self.track(tensor, kind)
        self.kind(id(tensor.untyped_storage()), kind)

    def made(self, key: object, size: int, kind: str) -> None:
        """Journal entry: a storage of this many bytes is made."""
        self.journal.append(("made", key, size, kind))
        self.sizes[key], self.kinds[key] = size, kind
        if kind == HOST:
            self.host_total += size
            self.host_peak = max(self.host_peak, self.host_total)
            return
        self.made_at[key], self.event_kinds[len(self.events)] = len(self.events), kind
        self.events.append((key, size, True))
        self.totals[kind] += size
        self.total += size
        if self.total > self.phase_max:
            self.phase_max = self.total
        if self.total > self.peak:
            self.peak, self.peak_split, self.peak_phase = self.total, dict(self.totals), self.phase

    def kind(self, key: object, kind: str) -> None:
        """Journal entry: a live storage is found to be of this kind (host memory stays host memory)."""
        if self.kinds[key] == HOST:
            return
        self.journal.append(("kind", key, kind))
        self.totals[self.kinds[key]] -= self.sizes[key]
        self.kinds[key] = self.event_kinds[self.made_at[key]] = kind
        self.totals[kind] += self.sizes[key]

    def freed(self, key: object) -> None:
        """Journal entry: a storage is freed (until the run is finished: later frees are the collector's
        timing, not the run's, and would make two runs' traces differ)."""
        if self.finished:
            return
        self.journal.append(("freed", key))
        size = self.sizes.pop(key)
        if self.kinds[key] == HOST:
            del self.kinds[key]
            self.host_total -= size
            return
        del self.made_at[key]
        self.events.append((key, size, False))
        self.totals[self.kinds.pop(key)] -= size
        self.total -= size

    def enter(self, phase: str) -> None:
        """Journal entry, and the phase callback of generator/steps.py: close the phase that ended, start the
        next."""
        self.journal.append(("phase", phase))
        self.phase_peaks[self.phase] = self.phase_max
        self.phase, self.phase_max = phase, self.total
        self.phase_marks.append((len(self.events), phase))

    def finish(self) -> None:
        """Close the last phase, and the journal."""
        self.phase_peaks[self.phase] = self.phase_max
        self.finished = True

    def returned(self, out: Any) -> None:
        """Track the storage of every tensor an operator returned, in order: an operator returns a tensor, a tuple
        or list of them (torch.return_types too), a number or None."""
        if isinstance(out, (tuple, list)):
            for item in out:
                self.returned(item)
        elif hasattr(out, "untyped_storage"):
            self.track(out, self.making)

    def mode(self) -> Any:
        """A TorchDispatchMode that tracks the storage of every tensor an operator returns (real tensors: the
        tests' reference run; a simulation tracks inside its FakeTensorMode, fake_mode.py)."""
        from torch.utils._python_dispatch import TorchDispatchMode

        tracker = self

        class _Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                out = func(*args, **(kwargs or {}))
                tracker.returned(out)
                return out

        return _Mode()


class Replayed(StorageTracker):
    """A finished run's tracker from its journal, replayed as far as it is read. The tensor peak, the phase that sets
    it and the trace the allocator models replay (what a GPU's part reads) come from one lean pass over the journal
    (``peak_and_trace``); anything else (the split, each phase's peak, what sharding reads) from the whole replay,
    made when first read. A deep model's generation journal holds 170,000 entries: 78 ms a whole replay, 22 ms the
    lean pass. Both give the same figures (tests/test_tracker.py)."""

    def __init__(self, journal: list[tuple[Any, ...]]) -> None:  # the rest comes from the whole replay, when read
        self.journal = journal
        self.peak, self.peak_phase, self.events, self.host_peak = peak_and_trace(journal)
        self.finished = True

    def __getattr__(self, name: str) -> Any:  # what the lean pass does not give: the whole replay's
        return getattr(self._whole, name)

    @functools.cached_property
    def _whole(self) -> StorageTracker:
        return StorageTracker.replay_whole(self.journal)


def peak_and_trace(journal: list[tuple[Any, ...]]) -> tuple[int, str, list[tuple[object, int, bool]], int]:
    """A journal's tensor peak, the phase that sets it (the first moment it is reached), its trace of (storage,
    bytes, made or freed), and its peak of host memory: StorageTracker's made, freed and enter as far as these four
    figures go."""
    sizes: dict[object, int] = {}
    host: dict[object, int] = {}
    events: list[tuple[object, int, bool]] = []
    total = peak = host_total = host_peak = 0
    phase = peak_phase = "load"
    for entry in journal:
        tag = entry[0]
        if tag == "made":
            key, size = entry[1], entry[2]
            if entry[3] == HOST:
                host[key], host_total = size, host_total + size
                host_peak = max(host_peak, host_total)
                continue
            sizes[key] = size
            events.append((key, size, True))
            total += size
            if total > peak:
                peak, peak_phase = total, phase
        elif tag == "freed":
            key = entry[1]
            if key in host:
                host_total -= host.pop(key)
                continue
            size = sizes.pop(key)
            events.append((key, size, False))
            total -= size
        elif tag == "phase":
            phase = entry[1]
    return peak, peak_phase, events, host_peak
