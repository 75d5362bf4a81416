"""The caching allocator's replay as it was before blocks were linked to their neighbours (generator/answers/
cuda_allocator.py at e562277): each block found by walking its segment's list. Kept verbatim as the slow path
the fast one replaced; tests/test_cuda_allocator.py holds that both give every figure the same."""

from bisect import bisect_left, insort
from dataclasses import dataclass, field

from generator.answers.cuda_allocator import PAGE, pool_of, rounded, segment_size, worth_splitting


@dataclass(eq=False)  # one block is one object: list.index compares identity, not the four fields
class Block:
    segment: int
    offset: int
    size: int
    free: bool = True


@dataclass
class Segment:
    pool: str
    size: int
    blocks: list[Block] = field(default_factory=list)  # in address order


class CachingAllocator:
    """Replays malloc and free; reports bytes reserved (segments) and allocated (live blocks), and their peaks."""

    def __init__(self, expandable: bool = False) -> None:
        self.expandable = expandable
        self.segments: list[Segment] = []
        self.free_blocks: dict[str, list[tuple[int, int, int]]] = {"small": [], "large": []}  # (size, seg, offset)
        self.live: dict[object, Block] = {}
        self.reserved = self.allocated = self.peak_reserved = self.peak_allocated = 0
        self.expandable_segment: dict[str, int] = {}

    def malloc(self, key: object, size: int) -> None:
        """Serve one request under the caller's key (a storage). An empty storage takes no memory."""
        if size == 0:
            return
        size = rounded(size)
        pool = pool_of(size)
        block = self._best_fit(pool, size) or self._grow(pool, size)
        self._take(block, size)
        self.live[key] = block
        self.allocated += block.size
        self.peak_allocated = max(self.peak_allocated, self.allocated)

    def free(self, key: object) -> None:
        """Return a request's block to its pool, merged with free neighbours in its segment."""
        block = self.live.pop(key, None)
        if block is None:  # an empty storage
            return
        self.allocated -= block.size
        segment = self.segments[block.segment]
        index = segment.blocks.index(block)
        block.free = True
        for neighbour in (index + 1, index - 1):  # the later one first, so index stays valid
            if 0 <= neighbour < len(segment.blocks) and segment.blocks[neighbour].free:
                self._merge(segment, min(index, neighbour))
                index = min(index, neighbour)
        self._index(segment.blocks[index], segment.pool)

    def _best_fit(self, pool: str, size: int) -> Block | None:
        candidates = self.free_blocks[pool]  # sorted by size: the first at least `size` long is the best fit
        position = bisect_left(candidates, (size, -1, -1))
        if position == len(candidates):
            return None
        _, segment, offset = candidates.pop(position)
        return next(b for b in self.segments[segment].blocks if b.offset == offset)

    def _grow(self, pool: str, size: int) -> Block:
        if not self.expandable:
            self.segments.append(Segment(pool, segment_size(size)))
            block = Block(len(self.segments) - 1, 0, segment_size(size))
            self.segments[-1].blocks.append(block)
            self._reserve(block.size)
            return block
        return self._map_pages(pool, size)

    def _map_pages(self, pool: str, size: int) -> Block:
        """Expandable segments: map pages at the end of the pool's one segment, merged with a free tail."""
        if pool not in self.expandable_segment:
            self.segments.append(Segment(pool, 0))
            self.expandable_segment[pool] = len(self.segments) - 1
        number = self.expandable_segment[pool]
        segment = self.segments[number]
        tail = segment.blocks[-1] if segment.blocks and segment.blocks[-1].free else None
        have = tail.size if tail else 0
        pages = -(-(size - have) // PAGE[pool])
        grown = pages * PAGE[pool]
        self._reserve(grown)
        segment.size += grown
        if tail is None:
            tail = Block(number, segment.size - grown, 0)
            segment.blocks.append(tail)
        else:
            self._unindex((tail.size, number, tail.offset), pool)
        tail.size += grown
        return tail

    def _take(self, block: Block, size: int) -> None:
        segment = self.segments[block.segment]
        block.free = False
        remaining = block.size - size
        if worth_splitting(segment.pool, remaining):
            block.size = size
            rest = Block(block.segment, block.offset + size, remaining)
            segment.blocks.insert(segment.blocks.index(block) + 1, rest)
            self._index(rest, segment.pool)

    def _merge(self, segment: Segment, index: int) -> None:
        first, second = segment.blocks[index], segment.blocks[index + 1]
        for block in (first, second):
            self._unindex((block.size, block.segment, block.offset), segment.pool)
        first.size += second.size
        first.free = True
        del segment.blocks[index + 1]

    def _index(self, block: Block, pool: str) -> None:
        insort(self.free_blocks[pool], (block.size, block.segment, block.offset))

    def _unindex(self, entry: tuple[int, int, int], pool: str) -> None:
        """Take a block out of its pool's free list, if it is there (found by bisection: the list is sorted)."""
        candidates = self.free_blocks[pool]
        position = bisect_left(candidates, entry)
        if position < len(candidates) and candidates[position] == entry:
            del candidates[position]

    def _reserve(self, n_bytes: int) -> None:
        self.reserved += n_bytes
        self.peak_reserved = max(self.peak_reserved, self.reserved)


