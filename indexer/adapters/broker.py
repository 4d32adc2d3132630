"""Redis, the Celery broker and the dead-letter store's home: one client per process, the
classification of its errors, and the queue gauges read from it at scrape time."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from functools import lru_cache

import redis
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from indexer.adapters.dlq import DeadLetterStore
from indexer.core.errors import ErrorKind
from indexer.settings import Settings

log = logging.getLogger(__name__)


@lru_cache(maxsize=4)
def redis_client(settings: Settings) -> redis.Redis:
    return redis.Redis.from_url(settings.redis_url, socket_timeout=10, socket_connect_timeout=5)


@lru_cache(maxsize=4)
def dead_letters(settings: Settings) -> DeadLetterStore:
    return DeadLetterStore(redis_client(settings), settings.queue_prefix, settings.dlq_ttl_days)


def classify(exc: BaseException) -> ErrorKind | None:
    """Redis down, restarting or slow is transient; other Redis errors (a wrong command or
    type: a bug) are unexpected; ``None`` for anything not Redis's."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError):
        return ErrorKind.TRANSIENT
    if isinstance(exc, RedisError):
        # a broker restarting answers LOADING / READONLY / MASTERDOWN before it serves again
        text = str(exc).split(" ", 1)[0]
        busy = text in {"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "BUSY"}
        return ErrorKind.TRANSIENT if busy else ErrorKind.UNEXPECTED
    return None


class QueueCollector(Collector):
    """Celery queue depths (ready tasks per queue, unacked in flight) and dead letters, read
    from Redis at scrape time; a Redis outage yields ``sidecar_redis_up 0``, never an error."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queues = (self._settings.fulltext_queue, self._settings.vectors_queue)
        up = GaugeMetricFamily("sidecar_redis_up", "1 if Redis answered this scrape.")
        try:
            pipe = redis_client(self._settings).pipeline(transaction=False)
            for queue in queues:
                pipe.llen(queue)
            pipe.hlen("unacked")
            *depths, unacked = pipe.execute()
            dead = dead_letters(self._settings).count()
        except Exception as exc:  # a scrape must never fail on Redis trouble
            log.warning("metrics: redis unavailable: %s", exc)
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        depth = GaugeMetricFamily(
            "sidecar_queue_depth", "Tasks waiting in each Celery queue.", labels=["queue"]
        )
        for queue, count in zip(queues, depths, strict=True):
            depth.add_metric([queue], int(count))
        yield from (up, depth)
        yield GaugeMetricFamily(
            "sidecar_queue_unacked",
            "Tasks delivered to a worker and not yet acknowledged (all queues of the broker).",
            value=int(unacked),
        )
        yield GaugeMetricFamily(
            "sidecar_dlq_entries", "Entries in the dead-letter store.", value=dead
        )


def queue_registry(settings: Settings) -> CollectorRegistry:
    """A registry of the Redis-backed gauges only (the API adds it to its own exposition)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(settings))
    return registry
