"""``sidecar stack``: real processes on free ports, in a state dir of the test's own.

The tests in this module share one throwaway stack and run in file order: the last one kills
Redis and takes the stack down. They never touch the developer's main stack (default ports,
``.sidecar``), which may be running next to them.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
import typer
from typer.testing import CliRunner

from indexer.adapters.aws.clients import client
from sidecar_tools.cli.stack_cmds import register
from sidecar_tools.stack import manager
from sidecar_tools.stack.settings import StackSettings, get_stack_settings
from tests.support.waiting import wait_for

# No skip when java or mvn is missing: CI installs them, and a skipped stack test proves nothing.
pytestmark = [pytest.mark.stack, pytest.mark.slow]

SPAWNED = ("opensearch", "redis", "moto")


def _free_ports(count: int) -> list[int]:
    """Distinct free ports: all sockets stay bound until every port is chosen."""
    socks = [socket.socket() for _ in range(count)]
    try:
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]
    finally:
        for sock in socks:
            sock.close()


def _port_open(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _cli(*args: str) -> Any:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """Stand-in for the real ``sidecar`` root command."""

    register(app)
    return CliRunner().invoke(app, ["stack", *args])


def _status_json() -> dict[str, Any]:
    result = _cli("status", "--json")
    data: dict[str, Any] = json.loads(result.stdout)
    assert (result.exit_code == 0) == data["ok"]
    return data


def _http(settings: StackSettings, method: str, path: str, body: Any = None) -> Any:
    request = urllib.request.Request(
        settings.opensearch_url + path,
        method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as resp:
        return json.loads(resp.read())


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StackSettings]:
    """Bring up a private stack once for the module, and always take it down afterwards."""
    state = tmp_path_factory.mktemp("stack")
    os_port, redis_port, moto_port = _free_ports(3)
    env = {
        "SIDECAR_STATE_DIR": str(state),
        "SIDECAR_OPENSEARCH_URL": f"http://127.0.0.1:{os_port}",
        "SIDECAR_REDIS_URL": f"redis://127.0.0.1:{redis_port}/0",
        "SIDECAR_AWS_ENDPOINT_URL": f"http://127.0.0.1:{moto_port}",
        "SIDECAR_QDRANT_PATH": str(state / "qdrant"),
    }
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        get_stack_settings.cache_clear()
        settings = get_stack_settings()
        try:
            manager.up(settings)
            yield settings
        finally:
            manager.down(settings)
            get_stack_settings.cache_clear()


def test_failed_up_names_the_component_and_stops_what_it_started(tmp_path: Path) -> None:
    """A squatter on Redis's port makes redis-server exit; the rest must be rolled back."""
    os_port, redis_port, moto_port = _free_ports(3)
    settings = StackSettings(
        state_dir=tmp_path,
        opensearch_url=f"http://127.0.0.1:{os_port}",
        redis_url=f"redis://127.0.0.1:{redis_port}/0",
        aws_endpoint_url=f"http://127.0.0.1:{moto_port}",
        qdrant_path=tmp_path / "qdrant",
    )
    squatter = socket.create_server(("127.0.0.1", redis_port))
    with squatter, pytest.raises(manager.StackError, match="redis") as failure:
        manager.up(settings)
    assert "Address already in use" in str(failure.value)
    assert not list((tmp_path / "pids").glob("*.pid"))
    assert not _port_open(os_port)
    assert not _port_open(moto_port)


def test_status_reports_every_component_up(stack: StackSettings) -> None:
    assert _cli("status").exit_code == 0
    data = _status_json()
    rows = {row["name"]: row for row in data["components"]}
    assert data["ok"] is True
    assert set(rows) == {*SPAWNED, "qdrant"}
    assert all(row["state"] == "up" for row in rows.values())
    assert rows["opensearch"]["address"] == stack.opensearch_url
    assert rows["redis"]["address"] == stack.redis_url
    assert rows["moto"]["address"] == stack.aws_endpoint_url
    assert rows["qdrant"]["address"] == str(stack.qdrant_path.resolve())
    assert all(isinstance(rows[name]["pid"], int) for name in SPAWNED)


def test_opensearch_is_the_real_thing(stack: StackSettings) -> None:
    banner = _http(stack, "GET", "/")
    assert banner["version"]["distribution"] == "opensearch"
    assert banner["version"]["number"].startswith("2.19.")
    nodes = _http(stack, "GET", "/_nodes/plugins")["nodes"]
    classes = {p["classname"] for node in nodes.values() for p in node["plugins"]}
    assert "org.opensearch.analysis.common.CommonAnalysisPlugin" in classes
    assert "org.opensearch.index.reindex.ReindexPlugin" in classes

    mapping = {"properties": {"body": {"type": "text", "analyzer": "english"}}}
    _http(stack, "PUT", "/probe", {"settings": {"number_of_replicas": 0}, "mappings": mapping})
    tokens = _http(stack, "POST", "/probe/_analyze", {"field": "body", "text": "running dogs"})
    assert [t["token"] for t in tokens["tokens"]] == ["run", "dog"]
    for i, text in enumerate(("keep me", "drop me", "drop this too")):
        _http(stack, "PUT", f"/probe/_doc/{i}?refresh=true", {"body": text})
    deleted = _http(stack, "POST", "/probe/_delete_by_query?refresh=true",
                    {"query": {"match": {"body": "drop"}}})
    assert deleted["deleted"] == 2
    assert _http(stack, "GET", "/probe/_count")["count"] == 1


def test_redis_and_moto_answer(stack: StackSettings) -> None:
    conn = redis.Redis.from_url(stack.redis_url)
    assert conn.ping()
    conn.close()
    assert "TableNames" in client(stack, "dynamodb").list_tables()
    assert "Streams" in client(stack, "dynamodbstreams").list_streams()
    s3 = client(stack, "s3")
    s3.create_bucket(Bucket="probe")
    assert [b["Name"] for b in s3.list_buckets()["Buckets"]] == ["probe"]


def test_up_again_is_a_noop(stack: StackSettings) -> None:
    before = {row.name: row.pid for row in manager.status(stack)}
    began = time.monotonic()
    after = {row.name: row.pid for row in manager.up(stack)}
    assert after == before
    assert time.monotonic() - began < 15


def test_env_exports_the_running_stack(stack: StackSettings) -> None:
    result = _cli("env")
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert f"export SIDECAR_OPENSEARCH_URL={stack.opensearch_url}" in lines
    assert f"export SIDECAR_AWS_ENDPOINT_URL={stack.aws_endpoint_url}" in lines
    assert f"export SIDECAR_QDRANT_PATH={stack.qdrant_path.resolve()}" in lines
    assert any(line.startswith("export SIDECAR_REDIS_URL=") for line in lines)


def test_killed_redis_is_reported_then_down_leaves_nothing(stack: StackSettings) -> None:
    """Runs last: it breaks the stack on purpose."""
    pids = {row["name"]: row["pid"] for row in _status_json()["components"]}
    os.kill(pids["redis"], signal.SIGKILL)
    port = _port(stack.redis_url)
    wait_for(lambda: not _port_open(port), timeout=10, interval=0.1,
             message=f"the killed Redis still listens on {port}")
    result = _cli("status", "--json")
    assert result.exit_code != 0
    redis_row = next(r for r in json.loads(result.stdout)["components"] if r["name"] == "redis")
    assert redis_row["state"] == "down"

    stopped = manager.down(stack)
    assert set(stopped) == {"opensearch", "moto"}
    assert manager.down(stack) == []
    for name in SPAWNED:
        assert not _running(pids[name]), f"{name} (pid {pids[name]}) still running"
    for url in (stack.opensearch_url, stack.redis_url, str(stack.aws_endpoint_url)):
        assert not _port_open(_port(url))
    assert not list((stack.state_dir / "pids").glob("*.pid"))
    assert _cli("status").exit_code != 0


def _port(url: str) -> int:
    return int(url.rsplit(":", 1)[1].split("/")[0])


def _running(pid: int) -> bool:
    """Alive and not a zombie (our own children linger as zombies until reaped)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in "ZX"
