"""A minute of chaos (bench/chaos.py, the same code as the ten-minute run): three replicas,
writers over REST and by plain SQL in two orgs, followers resuming on random replicas, while
replicas are killed, PostgreSQL restarts, a relay's connection freezes and a follower stops
reading, and webhook receivers go through outages.

Callers: the writers, followers and webhook receivers of the run. What they would notice: an
acknowledged write that never arrived, one that arrived twice or out of order, or a row of the
other org; for a webhook, after dropping duplicates by `webhook-id` (at least once is its
promise), one never received or received out of order.
"""

from __future__ import annotations

import asyncio

from bench import chaos


def test_followers_get_every_acknowledged_write_once_in_order_through_a_minute_of_faults(
) -> None:
    # The drain is generous: on a loaded 2-core box, a replica restarted at the end of the
    # minute may take a while to serve, and the followers wait for it.
    result = asyncio.run(chaos.run(chaos.Options(seconds=60, drain=300, quiet=True)))
    print(result.report())
    assert result.acknowledged > 0 and sum(result.faults.values()) > 0
    assert (result.lost, result.duplicated, result.out_of_order, result.leaked,
            result.resyncs) == (0, 0, 0, 0, 0), result.report()
    assert result.hooks_received > 0
    assert (result.hooks_lost, result.hooks_out_of_order) == (0, 0), result.report()
