"""What each service of the local stack is: where it listens, how to start it, how to ask it.

``manager`` owns processes (spawn, pid files, stop); this module owns the per-service facts so
adding a service means adding one :class:`Spec` here. Probes are cheap and never raise: they
first try a plain TCP connect so a closed port answers in microseconds instead of after boto3's
or urllib's retry and timeout machinery.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from sidecar_tools.stack import opensearch_node
from sidecar_tools.stack.settings import StackSettings

__all__ = ["LOCAL_HOSTS", "ComponentStatus", "Spec", "StackError", "env_lines", "moto_url",
           "opensearch_cache_dir", "qdrant_state", "specs"]

LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
"""Hosts we may start a service for; anything else is someone else's server, only probed."""

_PROBE_TIMEOUT_S = 2.0
_APT_TIMEOUT_S = 600.0


class StackError(RuntimeError):
    """A component could not be prepared, started or reached; the message says which and why."""


@dataclass(frozen=True)
class ComponentStatus:
    """One row of the status table (and of ``status --json``)."""

    name: str
    address: str
    state: str
    pid: int | None
    detail: str = ""


@dataclass(frozen=True)
class Spec:
    """One spawnable service: its address, readiness probe and (possibly slow) argv builder."""

    name: str
    address: str
    host: str
    port: int
    timeout_s: float
    probe: Callable[[], bool]
    argv: Callable[[], list[str]]

    @property
    def local(self) -> bool:
        """Only loopback services are ours to start; a remote one is just probed."""
        return self.host in LOCAL_HOSTS


def port_free(port: int) -> bool:
    """Whether a server could listen on this loopback port now (nothing bound to it)."""
    with socket.socket() as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def _port_open(host: str, port: int) -> bool:
    """A TCP connect: the cheapest "is anything listening" check before a protocol probe."""
    try:
        with socket.create_connection((host, port), timeout=_PROBE_TIMEOUT_S):
            return True
    except OSError:
        return False


def _host_port(url: str, default_port: int) -> tuple[str, int]:
    """Host and port of a URL, with the scheme's usual port when the URL omits it."""
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


def moto_url(settings: StackSettings) -> str:
    """moto's endpoint: the configured AWS endpoint, else ``moto_port`` on loopback."""
    if settings.aws_endpoint_url:
        return settings.aws_endpoint_url.rstrip("/")
    return f"http://127.0.0.1:{settings.moto_port}"


# --- OpenSearch -------------------------------------------------------------------------------


def opensearch_cache_dir(settings: StackSettings) -> Path:
    """Where the launcher's jars live: one per-user cache keyed by the launcher's inputs.

    Shared across clones, state dirs and test stacks so only the first ``up`` on a machine
    pays for mvn + javac; keyed by a hash of the pom and Java sources so two checkouts with
    different launchers never rebuild each other's cache. Falls back to the state dir when the
    user cache is not writable.
    """
    digest = hashlib.sha256(opensearch_node.OPENSEARCH_VERSION.encode())
    sources = [opensearch_node.LAUNCHER_DIR / "pom.xml",
               *sorted((opensearch_node.LAUNCHER_DIR / "src").rglob("*.java"))]
    for path in sources:
        digest.update(path.read_bytes() if path.is_file() else b"")
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    name = f"opensearch-{opensearch_node.OPENSEARCH_VERSION}-{digest.hexdigest()[:12]}"
    cache = base / "mail-search-sidecar" / name
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError:
        cache = settings.state_dir.resolve() / "opensearch" / "cache"
    return cache


def _opensearch_probe(url: str) -> bool:
    """Up means ``GET /`` answers the JSON banner with a version, not merely an open port."""
    host, port = _host_port(url, 9200)
    if not _port_open(host, port):
        return False
    try:
        with urllib.request.urlopen(url + "/", timeout=_PROBE_TIMEOUT_S) as resp:  # noqa: S310
            body = json.loads(resp.read())
    except (OSError, ValueError):
        return False
    return isinstance(body, dict) and bool(body.get("version", {}).get("number"))


def _opensearch_argv(settings: StackSettings, port: int) -> list[str]:
    """Resolve the jars (cold: minutes, warm: milliseconds) and build the java command."""
    try:
        classpath = opensearch_node.prepare(opensearch_cache_dir(settings))
    except opensearch_node.OpenSearchBuildError as exc:
        raise StackError(f"opensearch: {exc}") from exc
    home = settings.state_dir.resolve() / "opensearch" / "home"
    home.mkdir(parents=True, exist_ok=True)
    try:
        return opensearch_node.command(classpath, home, port, "sidecar-local",
                                       settings.opensearch_heap)
    except ValueError as exc:  # a bad SIDECAR_OPENSEARCH_HEAP
        raise StackError(f"opensearch: {exc}") from exc


# --- Redis ------------------------------------------------------------------------------------


def _redis_probe(url: str) -> bool:
    """Up means PING answers; redis-py is already a dependency of the pipeline."""
    import redis

    host, port = _host_port(url, 6379)
    if not _port_open(host, port):
        return False
    try:
        conn = redis.Redis.from_url(url, socket_timeout=_PROBE_TIMEOUT_S)
        try:
            return bool(conn.ping())
        finally:
            conn.close()
    except redis.RedisError:
        return False


def _redis_binary() -> str:
    """Find redis-server, installing Debian's package when we are root and it is missing."""
    found = shutil.which("redis-server") or ("/usr/bin/redis-server"
                                             if Path("/usr/bin/redis-server").is_file() else None)
    if found:
        return found
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        raise StackError("redis: redis-server is not installed "
                         "(Debian: apt-get install redis-server)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    script = "apt-get update -qq && apt-get install -y -qq redis-server"
    result = subprocess.run(["/bin/sh", "-c", script], env=env, capture_output=True, text=True,
                            timeout=_APT_TIMEOUT_S, check=False)
    if result.returncode != 0 or not Path("/usr/bin/redis-server").is_file():
        tail = "\n".join((result.stdout + result.stderr).strip().splitlines()[-15:])
        raise StackError(f"redis: installing redis-server with apt-get failed:\n{tail}")
    return "/usr/bin/redis-server"


def _redis_argv(settings: StackSettings, port: int) -> list[str]:
    """Loopback only, AOF every second (a crash loses ≤1 s of queue), no RDB snapshots."""
    data = settings.state_dir.resolve() / "redis"
    data.mkdir(parents=True, exist_ok=True)
    return [_redis_binary(), "--bind", "127.0.0.1", "--port", str(port), "--dir", str(data),
            "--appendonly", "yes", "--appendfsync", "everysec", "--save", "",
            "--protected-mode", "yes", "--daemonize", "no"]


# --- moto -------------------------------------------------------------------------------------


def _moto_probe(settings: StackSettings) -> bool:
    """Up means DynamoDB, DynamoDB Streams and S3 all answer through our own client factory."""
    from indexer.adapters.aws.clients import client

    host, port = _host_port(moto_url(settings), 5000)
    if not _port_open(host, port):
        return False
    probe_settings = settings.model_copy(update={"aws_endpoint_url": moto_url(settings)})
    try:
        client(probe_settings, "dynamodb").list_tables(Limit=1)
        client(probe_settings, "dynamodbstreams").list_streams(Limit=1)
        client(probe_settings, "s3").list_buckets()
    except Exception:  # any botocore/urllib3 failure just means "not ready yet"
        return False
    return True


def _moto_argv(port: int) -> list[str]:
    """moto's server through :mod:`sidecar_tools.stack.moto_server` (cheap transaction rollback)."""
    module = "sidecar_tools.stack.moto_server"
    return [sys.executable, "-m", module, "-H", "127.0.0.1", "-p", str(port)]


# --- Qdrant (never started) -------------------------------------------------------------------


def qdrant_state(settings: StackSettings) -> ComponentStatus:
    """Qdrant's row: the embedded store on disk, or a probed server (never started by us).

    Embedded Qdrant has no process, so it is "up" whenever usable; whether its folder exists and
    whether some process (a running worker) holds its lock is information, not a failure.
    """
    if settings.qdrant_url:
        url = settings.qdrant_url.rstrip("/")
        for path in ("/readyz", "/"):
            try:
                with urllib.request.urlopen(url + path, timeout=_PROBE_TIMEOUT_S):  # noqa: S310
                    return ComponentStatus("qdrant", url, "up", None, "server (not managed)")
            except OSError:
                continue
        return ComponentStatus("qdrant", url, "down", None,
                               "server not answering (the stack never starts it)")
    store = settings.qdrant_path.resolve()
    lock = store / ".lock"
    if not lock.is_file():
        note = "no lock yet" if store.is_dir() else "created on first use"
    else:
        note = f"lock {'held' if _lock_held(lock) else 'free'}"
    return ComponentStatus("qdrant", str(store), "up", None, f"embedded; {note}")


def _lock_held(lock: Path) -> bool:
    """Try the same exclusive flock qdrant-client takes, and release it at once."""
    with lock.open("rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def specs(settings: StackSettings) -> list[Spec]:
    """The spawnable components in display order; OpenSearch's generous timeout covers the JVM."""
    os_url = settings.opensearch_url.rstrip("/")
    os_host, os_port = _host_port(os_url, 9200)
    r_host, r_port = _host_port(settings.redis_url, 6379)
    m_url = moto_url(settings)
    m_host, m_port = _host_port(m_url, 5000)
    return [
        Spec("opensearch", os_url, os_host, os_port, 120.0,
             lambda: _opensearch_probe(os_url), lambda: _opensearch_argv(settings, os_port)),
        Spec("redis", settings.redis_url, r_host, r_port, 20.0,
             lambda: _redis_probe(settings.redis_url), lambda: _redis_argv(settings, r_port)),
        Spec("moto", m_url, m_host, m_port, 30.0,
             lambda: _moto_probe(settings), lambda: _moto_argv(m_port)),
    ]


def env_lines(settings: StackSettings) -> list[str]:
    """``export`` lines that point every command at this stack (absolute paths, quoted)."""
    values = {
        "SIDECAR_STATE_DIR": str(settings.state_dir.resolve()),
        "SIDECAR_OPENSEARCH_URL": settings.opensearch_url,
        "SIDECAR_REDIS_URL": settings.redis_url,
        "SIDECAR_AWS_ENDPOINT_URL": moto_url(settings),
    }
    if settings.qdrant_url:
        values["SIDECAR_QDRANT_URL"] = settings.qdrant_url
    else:
        values["SIDECAR_QDRANT_PATH"] = str(settings.qdrant_path.resolve())
    return [f"export {key}={shlex.quote(value)}" for key, value in values.items()]
