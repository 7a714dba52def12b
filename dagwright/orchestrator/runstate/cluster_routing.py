"""Commands sent to the Redis Cluster node the caller names, not the one redis-py works out.

redis-py's cluster client finds a command's slot from its keys. EVAL and EVALSHA it
parses itself; for a command whose keys move with its arguments (``FCALL``: ``numkeys``)
it asks the server, ``COMMAND GETKEYS``, and does so twice per call (once for the slot,
once for the node): two more round trips to one node for every ``FCALL``, measured with
``INFO commandstats`` (decision 119). Naming the node (``target_nodes``) skips them.
Given a node, redis-py still follows ``MOVED`` and ``ASK`` (it refreshes its slot map and
sends again where the slot went) but does not retry after a connection error, a timeout,
``CLUSTERDOWN`` or an uncovered slot, which it does for a command it routed itself:
``send_to_slot_of`` does, asking the refreshed map for the key's primary each time (after
a failover, the promoted replica): at least as many times as redis-py would, and for as
long as the client's failover wait allows (``redis_cluster.FailoverWait``: pauses up to
1 s, until ``redis_cluster_failover_wait_s`` has passed), so that a call made while a
dead primary's replica is being elected goes through once it is. As with redis-py's own
retry of an EVALSHA, a call that timed out may have run: the run scripts are fenced.
"""

from __future__ import annotations

import time
from typing import Any

import redis
from redis.cluster import RedisCluster

from dagwright.redis_cluster import FAILOVER_ERRORS, FailoverWait, failover_wait_of


def send_to_slot_of(client: RedisCluster, key: str | bytes, *command: Any) -> Any:
    """Send ``command`` to the primary of ``key``'s slot (a script's first key: all of
    its keys share the slot) and return its reply."""
    wait = FailoverWait(failover_wait_of(client), at_least=_retry_of(client).get_retries())
    while True:
        try:
            node = client.get_node_from_key(key)
            return client.execute_command(*command, target_nodes=node)
        except FAILOVER_ERRORS as error:
            # redis-py re-read the slot map before raising a refused connection or
            # CLUSTERDOWN (a failover, a node gone): the next try asks it again
            time.sleep(wait.pause_after(error))


def send_to_each_primary(client: RedisCluster, *command: Any) -> list[Any]:
    """Send ``command`` to every primary, one at a time, each reply or error in its place:
    redis-py's own fan-out (``FUNCTION LOAD`` goes to all primaries) stops at the first
    primary that answers with an error, and the rest never get the command."""
    replies: list[Any] = []
    for node in client.get_primaries():
        try:
            replies.append(client.execute_command(*command, target_nodes=node))
        except redis.RedisError as error:  # the caller judges each primary's error
            replies.append(error)
    return replies


def _retry_of(client: RedisCluster) -> Any:
    """The cluster client's ``Retry`` (set in its ``__init__``; the type stubs do not
    declare it): how many times it sends a command again after a connection error."""
    return client.retry  # type: ignore[attr-defined]
