"""The garbage collector as a server worker sets it once started (authoric.app): what startup
built is frozen out of every collection, and young collections wait for many allocations, so
requests in flight are not walked again and again. In process, no server."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator

import pytest

from authoric.app import YOUNG_COLLECTION_THRESHOLD, settle_collector


@pytest.fixture
def collector() -> Iterator[None]:
    before = gc.get_threshold()
    try:
        yield
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_a_started_worker_freezes_what_startup_built_and_collects_young_objects_rarely(
        collector: None) -> None:
    _, middle, old = gc.get_threshold()
    built_at_startup = [object() for _ in range(10)], {"kept": [1, 2]}
    settle_collector()
    assert gc.get_threshold() == (YOUNG_COLLECTION_THRESHOLD, middle, old)
    assert YOUNG_COLLECTION_THRESHOLD >= 50_000
    assert gc.get_freeze_count() > 0
    assert not any(o is built_at_startup for o in gc.get_objects())


def test_cyclic_garbage_is_still_collected_once_the_threshold_is_reached(collector: None) -> None:
    """A request's reference cycle (an exception and its traceback, a closure) is not leaked:
    it waits for the next young collection, which the allocations after it trigger."""
    settle_collector()

    class Node:
        pass

    found: list[bool] = []
    cycle = Node()
    cycle.self = cycle  # type: ignore[attr-defined]
    weakref.finalize(cycle, found.append, True)
    del cycle
    assert found == []  # reference counting alone cannot free a cycle
    kept = [[] for _ in range(YOUNG_COLLECTION_THRESHOLD + 1_000)]
    assert found == [True]
    del kept
