"""PyTorch's CUDA caching allocator, as its documentation and source describe it, replayed over the allocation
trace a simulation records (each storage's size, in the order storages are made and freed).

The rules (c10/cuda/CUDACachingAllocator.cpp; the PyTorch dev-log "When does fragmentation occur in the CUDA
caching allocator?", 2026):
- every request is rounded up to a multiple of 512 bytes;
- requests of 1 MiB or less come from the small pool, larger ones from the large pool;
- a request takes the smallest free block of its pool that is large enough (best fit), split when the rest is
  worth keeping: at least 512 bytes in the small pool, more than 1 MiB in the large pool;
- with no such block, a new segment is allocated: 2 MiB for the small pool; for the large pool 20 MiB below
  10 MiB, else the request rounded up to 2 MiB;
- a freed block merges with free neighbours in its own segment, never across segments; segments are kept
  (reserved) until empty_cache(), which training code does not call.
With expandable segments, each pool is one segment that grows by mapping pages at its end (2 MiB for the
small pool, 20 MiB for the large one), so blocks merge across what would have been separate segments.

This is a model, not a measurement: it does not see cuBLAS or cuDNN workspaces, kernels that allocate
differently on a GPU, or the CUDA context, which the caller adds as a stated allowance."""

from bisect import bisect_left, insort
from dataclasses import dataclass, field

MIB = 1 << 20
# The caching allocator's documented constants.
MIN_BLOCK = 512  # every request is rounded up to a multiple of this
SMALL_SIZE = MIB  # the largest request the small pool serves
SMALL_BUFFER = 2 * MIB  # a small-pool segment
MIN_LARGE_ALLOC = 10 * MIB  # below this, a large request gets a 20 MiB segment
LARGE_BUFFER = 20 * MIB  # the large pool's segment for requests under MIN_LARGE_ALLOC
ROUND_LARGE = 2 * MIB

# What a device holds beside the caching allocator's replayed segments, from documented figures until a GPU
# measures it (`memory-budget gpu`). The CUDA context with lazy module loading (the default in PyTorch since 1.13
# and in CUDA on Linux since 12.2): 287,047,680 bytes in the pull request that made it PyTorch's default (against
# 666,632,192 loading every kernel eagerly).
CUDA_CONTEXT_LAZY_BYTES = 287_047_680
CUDA_CONTEXT_SOURCE = "pytorch/pytorch#86509"
# cuBLAS's and cuBLASLt's workspaces, one each: 32 MiB on Hopper, the size cuBLAS's documentation recommends and
# PyTorch uses there since pytorch/pytorch#120925 (4 MiB on smaller cards, so this errs high there).
CUBLAS_WORKSPACE_BYTES = 32 * 2**20
CUBLAS_WORKSPACE_SOURCE = "pytorch/pytorch#120925"
CUDA_CONTEXT_BYTES = CUDA_CONTEXT_LAZY_BYTES + 2 * CUBLAS_WORKSPACE_BYTES


def context_allowance_source() -> str:
    """Where the context allowance comes from, in words, with its parts."""
    return (f"the CUDA context with lazy module loading, {CUDA_CONTEXT_LAZY_BYTES:,} bytes as measured in "
            f"{CUDA_CONTEXT_SOURCE}, and cuBLAS's and cuBLASLt's workspaces, {CUBLAS_WORKSPACE_BYTES // 2**20} MiB "
            f"each on Hopper as in {CUBLAS_WORKSPACE_SOURCE}; documented figures, not measured here")


def cuda_rules() -> str:
    """The caching allocator's rules, in words, with their constants."""
    return (f"{MIN_BLOCK}-byte rounding, small and large pools, {SMALL_BUFFER // 2**20} and "
            f"{LARGE_BUFFER // 2**20} MiB segments, no merging across segments")


PAGE = {"small": SMALL_BUFFER, "large": LARGE_BUFFER}  # expandable segments map pages of these sizes


def rounded(size: int) -> int:
    """A request as the allocator sizes it: at least 512 bytes, in multiples of 512."""
    return max(MIN_BLOCK, -(-size // MIN_BLOCK) * MIN_BLOCK)


def pool_of(size: int) -> str:
    return "small" if size <= SMALL_SIZE else "large"


def segment_size(size: int) -> int:
    """The cudaMalloc a request makes when no cached block fits it."""
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    return LARGE_BUFFER if size < MIN_LARGE_ALLOC else -(-size // ROUND_LARGE) * ROUND_LARGE


def worth_splitting(pool: str, remaining: int) -> bool:
    return remaining >= MIN_BLOCK if pool == "small" else remaining > SMALL_SIZE


@dataclass(eq=False, slots=True)  # one block is one object, linked to its neighbours in address order
class Block:
    segment: int
    offset: int
    size: int
    free: bool = True
    before: "Block | None" = field(default=None, repr=False)
    after: "Block | None" = field(default=None, repr=False)


@dataclass(eq=False, slots=True)
class Segment:
    pool: str
    size: int
    last: Block | None = None  # the block at the highest address

    @property
    def blocks(self) -> list[Block]:
        """The segment's blocks in address order."""
        found, block = [], self.last
        while block is not None:
            found.append(block)
            block = block.before
        return found[::-1]

    def add(self, block: Block, after: Block | None) -> None:
        """Put a new block in the segment, just after ``after`` (None: it is the first)."""
        block.before, block.after = after, after.after if after else None
        if after is not None:
            after.after = block
        if block.after is not None:
            block.after.before = block
        else:
            self.last = block

    def remove(self, block: Block) -> None:
        """Take a block out of the segment (merged into the one before it)."""
        if block.before is not None:
            block.before.after = block.after
        if block.after is not None:
            block.after.before = block.before
        else:
            self.last = block.before


FreeEntry = tuple[int, int, int, Block]  # a free block in its pool's list: (size, segment, offset, the block)


class CachingAllocator:
    """Replays malloc and free; reports bytes reserved (segments) and allocated (live blocks), and their peaks.

    Each free block is listed in its pool's list sorted by (size, segment, offset), with the block, and found
    there by bisection; a block's neighbours are linked to it, so every request and free costs a bisection, not a
    walk of the segment (an expandable segment holds every block of its pool). A replay walks every storage a
    simulation makes and frees, a hundred thousand for a deep model's generation, so the request's rounding and
    pool are worked out once a size, and a request and a free each run in one method."""

    def __init__(self, expandable: bool = False) -> None:
        self.expandable = expandable
        self.segments: list[Segment] = []
        self.free_blocks: dict[str, list[FreeEntry]] = {"small": [], "large": []}
        self.live: dict[object, Block] = {}
        self.reserved = self.allocated = self.peak_reserved = self.peak_allocated = 0
        self.expandable_segment: dict[str, int] = {}
        self.requests: dict[int, tuple[int, str]] = {}  # a request's size -> its rounded size and pool

    def malloc(self, key: object, size: int) -> None:
        """Serve one request under the caller's key (a storage). An empty storage takes no memory."""
        if size == 0:
            return
        request = self.requests.get(size)
        if request is None:  # the rounded size and the pool, once for each size asked
            request = self.requests[size] = (rounded(size), pool_of(rounded(size)))
        size, pool = request
        candidates = self.free_blocks[pool]  # sorted by size: the first at least `size` long is the best fit
        position = bisect_left(candidates, (size, -1, -1))
        block = candidates.pop(position)[3] if position < len(candidates) else self._grow(pool, size)
        block.free = False
        remaining = block.size - size
        if worth_splitting(pool, remaining):
            block.size = size
            rest = Block(block.segment, block.offset + size, remaining)
            self.segments[block.segment].add(rest, block)
            insort(candidates, (remaining, rest.segment, rest.offset, rest))
        self.live[key] = block
        self.allocated += block.size
        if self.allocated > self.peak_allocated:
            self.peak_allocated = self.allocated

    def free(self, key: object) -> None:
        """Return a request's block to its pool, merged with free neighbours in its segment (the freed block was
        live, so only they are in the free list)."""
        block = self.live.pop(key, None)
        if block is None:  # an empty storage
            return
        self.allocated -= block.size
        segment = self.segments[block.segment]
        candidates = self.free_blocks[segment.pool]
        block.free = True
        after, before = block.after, block.before
        if after is not None and after.free:  # the later one first
            _unlist(candidates, after)
            block.size += after.size
            segment.remove(after)
        if before is not None and before.free:
            _unlist(candidates, before)
            before.size += block.size
            segment.remove(block)
            block = before
        insort(candidates, (block.size, block.segment, block.offset, block))

    def _grow(self, pool: str, size: int) -> Block:
        if not self.expandable:
            self.segments.append(Segment(pool, segment_size(size)))
            block = Block(len(self.segments) - 1, 0, segment_size(size))
            self.segments[-1].add(block, None)
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
        tail = segment.last if segment.last is not None and segment.last.free else None
        have = tail.size if tail else 0
        pages = -(-(size - have) // PAGE[pool])
        grown = pages * PAGE[pool]
        self._reserve(grown)
        segment.size += grown
        if tail is None:
            tail = Block(number, segment.size - grown, 0)
            segment.add(tail, segment.last)
        else:
            _unlist(self.free_blocks[pool], tail)
        tail.size += grown
        return tail

    def _reserve(self, n_bytes: int) -> None:
        self.reserved += n_bytes
        if self.reserved > self.peak_reserved:
            self.peak_reserved = self.reserved


def _unlist(candidates: list[FreeEntry], block: Block) -> None:
    """Take a free block out of its pool's free list (found by bisection: the list is sorted)."""
    entry = (block.size, block.segment, block.offset, block)
    position = bisect_left(candidates, entry)
    if position < len(candidates) and candidates[position] == entry:
        del candidates[position]


def replay(events: list[tuple[object, int, bool]], expandable: bool = False) -> CachingAllocator:
    """Replay a trace of (key, size, made): made True for a storage allocated, False for one freed."""
    allocator = CachingAllocator(expandable)
    malloc, free = allocator.malloc, allocator.free
    for key, size, made in events:
        if made:
            malloc(key, size)
        else:
            free(key)
    return allocator
