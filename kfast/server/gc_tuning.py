"""The garbage collector of a broker process, set once it has started.

A started broker holds a large, long-lived heap: the modules, the protocol
schemas, the metadata image, the partitions and their logs. CPython's
generation-2 collection walks all of it, and it runs on the event loop
thread, so every request in flight waits: 30-45 ms with 1,000 client
connections (bench/latency.py --probe, issue 21 item 3). What a broker
allocates per request is short-lived (frames, request and response
objects) and dies young.

So, after start-up: collect once, then ``gc.freeze()`` moves every object
left into the permanent generation, which collections never walk (what
Instagram did for its Python servers); and generation 0 is collected every
``GEN0_THRESHOLD`` net allocations instead of 700, so fewer young objects
are promoted merely for being alive when a collection ran. Cycles still
get collected; only the start-up heap is skipped.

Only the process's owner (``kfast serve``) calls this: an embedded broker
leaves its host's collector alone.
"""

from __future__ import annotations

import gc

# Net container allocations between generation-0 collections (CPython: 700).
GEN0_THRESHOLD = 20_000
# Collections of the younger generation before the next one is collected
# (CPython's defaults).
GEN1_THRESHOLD = 10
GEN2_THRESHOLD = 10


def freeze_startup_heap() -> int:
    """Collect, freeze what survives, raise the young threshold; returns the
    number of objects frozen."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(GEN0_THRESHOLD, GEN1_THRESHOLD, GEN2_THRESHOLD)
    return gc.get_freeze_count()
