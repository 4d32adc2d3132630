"""Redis, the Celery broker: one client per process, the classification of its errors, and
the queue gauges read from it at scrape time (with the dead-letter count, read from the
sidecar's DynamoDB table: :mod:`indexer.adapters.dynamodb.dlq`).

The broker is one server (``redis://``: a single node, or an ElastiCache replication group's
primary endpoint, whose DNS name moves to the promoted replica on a failover) or a master
found through Redis Sentinel (``sentinel://h1:26379;sentinel://h2:26379/0`` with
``SIDECAR_REDIS_SENTINEL_MASTER``). Everything that reaches Redis gets its address here: this
module's client (lost-task check, gauges, purge) asks the Sentinels for the master with
redis-py's ``Sentinel.master_for``; Celery and kombu get the same URL and options from
:func:`celery_url` and :func:`sentinel_options`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from urllib.parse import quote, unquote, urlsplit

import redis
from kombu.exceptions import OperationalError as KombuOperationalError
from prometheus_client import CollectorRegistry
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError
from redis.sentinel import Sentinel

from indexer.adapters.dynamodb.dlq import dead_letters
from indexer.core.errors import ErrorKind
from indexer.settings.pipeline import PipelineSettings

log = logging.getLogger(__name__)


SENTINEL_PORT = 26379
# Timeouts of the connections to the Sentinels (a dead Sentinel is skipped after these).
SENTINEL_SOCKET_KWARGS = {"socket_timeout": 2.0, "socket_connect_timeout": 2.0}


@dataclass(frozen=True, slots=True)
class SentinelAddress:
    """A ``sentinel://`` URL taken apart: the Sentinels, the database, the master's login."""

    sentinels: tuple[tuple[str, int], ...]
    db: int = 0
    username: str | None = None
    password: str | None = None


def sentinel_address(url: str) -> SentinelAddress:
    """``sentinel://[[user]:password@]host[:port][/db]`` parts joined by ``;`` (kombu's and
    Celery's form). The database may be given on any part (kombu reads it from the first,
    Celery from the first too): given twice it must agree; the login is the first given."""
    sentinels: list[tuple[str, int]] = []
    dbs: set[int] = set()
    username = password = None
    for part in (p.strip() for p in url.split(";")):
        if not part:
            continue
        found = urlsplit(part)
        if found.scheme.lower() != "sentinel" or not found.hostname:
            raise ValueError(f"not a sentinel://host:port URL: {part!r}")
        sentinels.append((found.hostname, found.port or SENTINEL_PORT))
        if found.path.strip("/"):
            dbs.add(int(found.path.strip("/")))
        if password is None and found.password is not None:
            username = unquote(found.username) if found.username else None
            password = unquote(found.password)
    if not sentinels or len(dbs) > 1:
        raise ValueError(f"a sentinel URL needs one or more Sentinels and one database: {url!r}")
    return SentinelAddress(tuple(sentinels), dbs.pop() if dbs else 0, username, password)


def celery_url(settings: PipelineSettings) -> str:
    """The broker and result-backend URL for Celery: ``redis_url`` itself, or for Sentinel
    the same Sentinels each written with the database and login (kombu and Celery read
    those from the first part only)."""
    if not settings.redis_sentinel:
        return settings.redis_url
    where = sentinel_address(settings.redis_url)
    login = ""
    if where.password is not None:
        login = f"{quote(where.username or '', safe='')}:{quote(where.password, safe='')}@"
    return ";".join(f"sentinel://{login}{host}:{port}/{where.db}"
                    for host, port in where.sentinels)


def sentinel_options(settings: PipelineSettings) -> dict[str, Any]:
    """kombu's ``broker_transport_options`` and Celery's ``result_backend_transport_options``
    that find the master through the Sentinels (empty for a plain ``redis://`` URL)."""
    if not settings.redis_sentinel:
        return {}
    return {"master_name": settings.redis_sentinel_master,
            "sentinel_kwargs": _sentinel_kwargs(settings)}


def _sentinel_kwargs(settings: PipelineSettings) -> dict[str, Any]:
    kwargs: dict[str, Any] = dict(SENTINEL_SOCKET_KWARGS)
    if settings.redis_sentinel_password is not None:
        kwargs["password"] = settings.redis_sentinel_password.get_secret_value()
    return kwargs


@lru_cache(maxsize=4)
def redis_client(settings: PipelineSettings) -> redis.Redis:
    """The process's client: of the one server, or of the master the Sentinels name (asked
    again on every new connection, so a failover is followed after one failed command)."""
    timeouts = {"socket_timeout": 10, "socket_connect_timeout": 5}
    if not settings.redis_sentinel:
        return redis.Redis.from_url(settings.redis_url, **timeouts)
    where = sentinel_address(settings.redis_url)
    sentinel = Sentinel(  # type: ignore[no-untyped-call]
        list(where.sentinels), sentinel_kwargs=_sentinel_kwargs(settings))
    assert settings.redis_sentinel_master is not None  # the settings' validator saw to it
    client: redis.Redis = sentinel.master_for(  # type: ignore[no-untyped-call]
        settings.redis_sentinel_master, db=where.db, username=where.username,
        password=where.password, **timeouts)
    return client


def classify(exc: BaseException) -> ErrorKind | None:
    """Redis down, restarting or slow is transient (with Sentinel: no master known yet, during
    a failover), and so is a task that could not be sent after kombu's retries; other Redis
    errors (a wrong command or type: a bug) are unexpected; ``None`` for anything not
    Redis's."""
    if isinstance(exc, RedisConnectionError | RedisTimeoutError | KombuOperationalError):
        return ErrorKind.TRANSIENT
    if isinstance(exc, RedisError):
        # a broker restarting answers LOADING / READONLY / MASTERDOWN before it serves again
        text = str(exc).split(" ", 1)[0]
        busy = text in {"LOADING", "READONLY", "MASTERDOWN", "TRYAGAIN", "BUSY"}
        return ErrorKind.TRANSIENT if busy else ErrorKind.UNEXPECTED
    return None


def lost_task_check(settings: PipelineSettings) -> Callable[[Sequence[Any]], list[bool]]:
    """``lost(results)``: for each task, whether it never started and is in neither of the
    deployment's queues nor among the unacked tasks (kombu's ``unacked`` hash, all queues).

    Both queues and the hash are read in one MULTI, so a task moving between them (a delivery,
    a restore) is seen in one place or the other; only a task in a worker's hands between
    kombu's pop and its unacked write is missed — exactly the one a SIGKILL there would lose,
    and sending it again is harmless. A result that is not a Celery one (a skipped stage) is
    never lost, nor is any task while Redis does not answer.
    """
    client = redis_client(settings)
    queues = (settings.fulltext_queue, settings.vectors_queue)

    def unstarted(result: Any) -> bool:
        return isinstance(getattr(result, "id", None), str) and result.state == "PENDING"

    def lost(results: Sequence[Any]) -> list[bool]:
        try:
            return _lost(results)
        except RedisError as exc:  # cannot tell now: nothing is lost; the next look will tell
            log.warning("lost-task check skipped: redis unavailable: %s", exc)
            return [False] * len(results)

    def _lost(results: Sequence[Any]) -> list[bool]:
        waiting = [unstarted(r) for r in results]
        if not any(waiting):
            return waiting
        pipe = client.pipeline(transaction=True)
        for queue in queues:
            pipe.lrange(queue, 0, -1)
        pipe.hvals("unacked")
        held = {_task_id(raw) for found in pipe.execute() for raw in found}
        return [
            w and r.id not in held and unstarted(r) for w, r in zip(waiting, results, strict=True)
        ]

    return lost


def _task_id(raw: bytes) -> str | None:
    """The Celery task id of a queued kombu message, or of an unacked entry
    (``[message, exchange, routing_key]``); None for anything else."""
    try:
        found = json.loads(raw)
    except ValueError:
        return None
    message = found[0] if isinstance(found, list) and found else found
    headers = message.get("headers") if isinstance(message, dict) else None
    task_id = headers.get("id") if isinstance(headers, dict) else None
    return task_id if isinstance(task_id, str) else None


class QueueCollector(Collector):
    """Celery queue depths (ready tasks per queue, unacked in flight), read from Redis at
    scrape time, and the dead-letter count (DynamoDB); a Redis outage yields
    ``sidecar_redis_up 0``, never an error."""

    def __init__(self, settings: PipelineSettings) -> None:
        self._settings = settings

    def collect(self) -> Iterator[GaugeMetricFamily]:
        queues = (self._settings.fulltext_queue, self._settings.vectors_queue,
                  self._settings.contacts_queue)
        up = GaugeMetricFamily("sidecar_redis_up", "1 if Redis answered this scrape.")
        try:
            pipe = redis_client(self._settings).pipeline(transaction=False)
            for queue in queues:
                pipe.llen(queue)
            pipe.hlen("unacked")
            *depths, unacked = pipe.execute()
        except Exception as exc:  # a scrape must never fail on Redis trouble
            log.warning("metrics: redis unavailable: %s", exc)
            up.add_metric([], 0)
            yield up
            yield from _dead_letter_gauge(self._settings)  # not in Redis: still counted
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
        yield from _dead_letter_gauge(self._settings)


DLQ_GAUGE_CAP = 10_000  # entries a scrape counts at most (a COUNT is billed per item read)


def _dead_letter_gauge(settings: PipelineSettings) -> Iterator[GaugeMetricFamily]:
    """``sidecar_dlq_entries`` from the sidecar's table; absent (logged) when DynamoDB does
    not answer, so a DynamoDB outage never reads as a Redis one."""
    try:
        dead = dead_letters(settings).count(cap=DLQ_GAUGE_CAP)
    except Exception as exc:  # a scrape must never fail on DynamoDB trouble
        log.warning("metrics: dead-letter count unavailable: %s", exc)
        return
    yield GaugeMetricFamily(
        "sidecar_dlq_entries",
        f"Entries in the dead-letter store (counted up to {DLQ_GAUGE_CAP}).",
        value=dead,
    )


def queue_registry(settings: PipelineSettings) -> CollectorRegistry:
    """A registry of the Redis-backed gauges only (the API adds it to its own exposition)."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(settings))
    return registry
