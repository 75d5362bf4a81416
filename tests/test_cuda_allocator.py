"""The CUDA caching allocator model against the examples its documentation works through (the PyTorch
dev-log "When does fragmentation occur in the CUDA caching allocator?") and its stated constants."""

from allocator_before import CachingAllocator as _Before
from hypothesis import given, settings
from hypothesis import strategies as st

from generator.answers.cuda_allocator import MIB, CachingAllocator, replay, rounded, segment_size


def _trace(*steps: tuple[str, int, int]) -> list[tuple[object, int, bool]]:
    """('alloc', count, MiB) or ('free', count, 0): allocations get consecutive keys; frees free them all."""
    events: list[tuple[object, int, bool]] = []
    live: list[int] = []
    key = 0
    for action, count, mib in steps:
        if action == "alloc":
            for _ in range(count):
                events.append((key, mib * MIB, True))
                live.append(key)
                key += 1
        else:
            events += [(k, 0, False) for k in live]
            live = []
    return events


def test_small_then_large_fragments_without_expandable_segments() -> None:
    allocator = replay(_trace(("alloc", 8, 16)))
    assert allocator.reserved == 128 * MIB  # eight 16 MiB segments
    allocator = replay(_trace(("alloc", 8, 16), ("free", 0, 0), ("alloc", 4, 32)))
    assert allocator.reserved == 256 * MIB and allocator.allocated == 128 * MIB  # the documented 256 MiB


def test_large_then_small_reuses_the_segments() -> None:
    allocator = replay(_trace(("alloc", 4, 32), ("free", 0, 0), ("alloc", 8, 16)))
    assert allocator.reserved == 128 * MIB and len(allocator.segments) == 4


def test_expandable_segments_map_twenty_mib_pages() -> None:
    allocator = replay(_trace(("alloc", 8, 16)), expandable=True)
    assert allocator.reserved == 140 * MIB  # seven 20 MiB pages for 128 MiB, as documented
    allocator = replay(_trace(("alloc", 8, 16), ("free", 0, 0), ("alloc", 4, 32)), expandable=True)
    assert allocator.reserved == 140 * MIB and allocator.allocated == 128 * MIB
    assert len(allocator.segments) == 1


def test_live_blocks_pin_splits_even_with_expandable_segments() -> None:
    allocator = CachingAllocator(expandable=True)
    for key in range(4):
        allocator.malloc(key, 16 * MIB)
    assert allocator.reserved == 80 * MIB  # 64 MiB in four pages, 16 MiB free at the end
    allocator.free(0)
    allocator.free(2)
    allocator.malloc("big", 32 * MIB)  # free 16 + 16 + 16 MiB, but no 32 MiB run: the segment grows
    assert allocator.reserved == 100 * MIB
    for key in (1, 3, "big"):
        allocator.free(key)
    allocator.malloc("again", 32 * MIB)  # everything merged: no growth
    assert allocator.reserved == 100 * MIB and allocator.allocated == 32 * MIB


def test_the_stated_constants() -> None:
    assert (rounded(0), rounded(1), rounded(512), rounded(513)) == (512, 512, 512, 1024)
    assert segment_size(MIB) == 2 * MIB  # the small pool: 2 MiB segments
    assert segment_size(MIB + 512) == 20 * MIB and segment_size(10 * MIB - 512) == 20 * MIB
    assert segment_size(10 * MIB) == 10 * MIB and segment_size(11 * MIB) == 12 * MIB  # 2 MiB rounding
    small = CachingAllocator()
    for key in range(4):
        small.malloc(key, 512 * 1024)  # four half-MiB requests share one 2 MiB segment
    assert small.reserved == 2 * MIB and small.allocated == 2 * MIB
    large = CachingAllocator()
    large.malloc("a", 3 * MIB)
    large.malloc("b", 3 * MIB)  # the rest of the first 20 MiB segment serves it
    assert large.reserved == 20 * MIB and len(large.segments) == 1
    tight = CachingAllocator()
    tight.malloc("a", 12 * MIB - 1024)
    tight.free("a")
    tight.malloc("b", 11 * MIB)  # a 1 MiB remainder is not split off in the large pool
    assert tight.allocated == 12 * MIB and tight.reserved == 12 * MIB


def test_empty_storages_take_nothing() -> None:
    allocator = replay([("e", 0, True), ("e", 0, False)])
    assert allocator.reserved == 0 and allocator.peak_allocated == 0


class _LinearScans(_Before):
    """The replay as it was before it was first made fast: the best fit and the removal from a free list found by
    scanning the list. The fast one finds both by bisection and each block by its links; every figure must come
    out the same as this one's and as the list walk's it replaced (tests/allocator_before.py)."""

    def _best_fit(self, pool, size):  # type: ignore[no-untyped-def]
        candidates = self.free_blocks[pool]
        for position, (block_size, segment, offset) in enumerate(candidates):
            if block_size >= size:
                del candidates[position]
                return next(b for b in self.segments[segment].blocks if b.offset == offset)
        return None

    def _unindex(self, entry, pool):  # type: ignore[no-untyped-def]
        if entry in self.free_blocks[pool]:
            self.free_blocks[pool].remove(entry)


def _states(allocator: CachingAllocator | _Before, events: list[tuple[object, int, bool]]) -> list[tuple]:
    """Reserved and allocated bytes after every event, then every segment's blocks at the end."""
    seen = []
    for key, size, made in events:
        allocator.malloc(key, size) if made else allocator.free(key)
        seen.append((allocator.reserved, allocator.allocated, allocator.peak_reserved))
    layout = [(s.pool, s.size, [(b.offset, b.size, b.free) for b in s.blocks]) for s in allocator.segments]
    return [*seen, tuple(layout)]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 40 * MIB), st.integers(0, 10**6)), max_size=120),
       st.booleans())
def test_the_fast_replay_equals_the_linear_one_event_by_event(steps, expandable) -> None:
    events: list[tuple[object, int, bool]] = []
    live: list[int] = []
    for number, (allocate, size, pick) in enumerate(steps):
        if allocate or not live:
            events.append((number, size, True))
            live.append(number)
        else:
            events.append((live.pop(pick % len(live)), 0, False))
    now = _states(CachingAllocator(expandable), events)
    assert now == _states(_Before(expandable), events) == _states(_LinearScans(expandable), events)


def test_the_fast_replay_equals_the_linear_one_on_a_simulated_training_step(monkeypatch) -> None:
    from conftest import TINY_MODEL

    from generator.matrix import parse_row
    from generator.model_source import resolve_model
    from generator.predict import simulate
    from generator.predict.exact import parts

    traces = []
    monkeypatch.setattr(parts, "replay", lambda events, expandable=False: traces.append(events) or
                        replay(events, expandable))
    simulate.simulate(parse_row("train-b4-s64"), resolve_model(str(TINY_MODEL)))
    assert len(traces[0]) > 1000  # a real trace: thousands of storages made and freed
    for expandable in (False, True):
        now = _states(CachingAllocator(expandable), traces[0])
        assert now == _states(_Before(expandable), traces[0]) == _states(_LinearScans(expandable), traces[0])


def _listed(allocator: CachingAllocator) -> dict[str, list[tuple[int, int, int]]]:
    """Each pool's free list as (size, segment, offset), each entry checked to carry its own free block."""
    for entries in allocator.free_blocks.values():
        for size, segment, offset, block in entries:
            assert (block.size, block.segment, block.offset, block.free) == (size, segment, offset, True)
            assert any(other is block for other in allocator.segments[segment].blocks)
    return {pool: [entry[:3] for entry in entries] for pool, entries in allocator.free_blocks.items()}


def _state(allocator: CachingAllocator) -> list[tuple[str, int, list[tuple[int, int, bool]]]]:
    """Every segment's pool and size, and its blocks in address order as (offset, size, free)."""
    return [(s.pool, s.size, [(b.offset, b.size, b.free) for b in s.blocks]) for s in allocator.segments]


def test_pools_and_splits_at_their_bounds() -> None:
    from generator.answers.cuda_allocator import pool_of, worth_splitting

    assert (pool_of(MIB), pool_of(MIB + 1)) == ("small", "large")
    assert (worth_splitting("small", 512), worth_splitting("small", 511)) == (True, False)
    assert (worth_splitting("large", MIB), worth_splitting("large", MIB + 1)) == (False, True)


def test_blocks_split_merge_and_are_reused_by_hand() -> None:
    a = CachingAllocator()
    a.malloc("a", 600 * 1024)  # small pool: a 2 MiB segment, split
    a.malloc("b", 600 * 1024)  # the best fit: the rest of it
    assert _state(a) == [("small", 2 * MIB, [(0, 614400, False), (614400, 614400, False), (1228800, 868352, True)])]
    assert _listed(a) == {"small": [(868352, 0, 1228800)], "large": []}
    a.free("a")
    assert _listed(a)["small"] == [(614400, 0, 0), (868352, 0, 1228800)]
    a.free("b")  # merged with both neighbours: one free block again
    assert _state(a) == [("small", 2 * MIB, [(0, 2 * MIB, True)])] and _listed(a)["small"] == [(2 * MIB, 0, 0)]
    a.malloc("c", 2 * MIB)  # the large pool: a 20 MiB segment, split
    a.malloc("d", MIB)  # exactly 1 MiB: the small pool, from the merged block
    assert _state(a) == [("small", 2 * MIB, [(0, MIB, False), (MIB, MIB, True)]),
                         ("large", 20 * MIB, [(0, 2 * MIB, False), (2 * MIB, 18 * MIB, True)])]
    assert (a.reserved, a.peak_reserved, a.allocated, a.peak_allocated) == (22 * MIB, 22 * MIB, 3 * MIB, 3 * MIB)
    a.free("c")
    assert (a.allocated, a.peak_allocated) == (MIB, 3 * MIB)


def test_expandable_segments_grow_one_segment_a_pool_by_hand() -> None:
    a = CachingAllocator(expandable=True)
    a.malloc("a", 3 * MIB)  # one 20 MiB page, split
    a.malloc("b", 30 * MIB)  # the free 17 MiB tail and one more page
    a.malloc("c", 100 * 1024)  # the small pool's own segment, 2 MiB pages
    assert _state(a) == [("large", 40 * MIB, [(0, 3 * MIB, False), (3 * MIB, 30 * MIB, False),
                                              (33 * MIB, 7 * MIB, True)]),
                         ("small", 2 * MIB, [(0, 102400, False), (102400, 2 * MIB - 102400, True)])]
    assert _listed(a) == {"small": [(2 * MIB - 102400, 1, 102400)], "large": [(7 * MIB, 0, 33 * MIB)]}
    assert (a.reserved, a.peak_reserved) == (42 * MIB, 42 * MIB)
