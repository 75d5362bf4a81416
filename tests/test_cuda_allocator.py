"""The CUDA caching allocator model against the examples its documentation works through (the PyTorch
dev-log "When does fragmentation occur in the CUDA caching allocator?") and its stated constants."""

from generator.predict.cuda_allocator import MIB, CachingAllocator, replay, rounded, segment_size


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
