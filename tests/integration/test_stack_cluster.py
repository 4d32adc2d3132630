"""``sidecar stack up|env|down --cluster`` (issue 26 part 2): the cluster stack as a standing
service, with real nodes, in a state dir of the test's own — so even a ``down`` that missed
its ``--cluster`` would find no single-node stack there to stop."""

from __future__ import annotations

import json
import socket
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from indexer.cli.main import app
from sidecar_tools.stack import cluster_service
from sidecar_tools.stack.cluster import ports
from sidecar_tools.stack.qdrant_server import server_binary
from sidecar_tools.stack.settings import StackSettings, get_stack_settings

pytestmark = [pytest.mark.slow, pytest.mark.qdrant_server, pytest.mark.timeout(600),
              pytest.mark.skipif(server_binary() is None, reason="no Qdrant server binary")]


def _cli(*args: str) -> Any:
    """``sidecar stack ARGS`` through the real CLI (its tooling commands registered)."""
    return CliRunner().invoke(app, ["stack", *args])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


@pytest.fixture
def state(tmp_path: Path) -> Iterator[StackSettings]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SIDECAR_STATE_DIR", str(tmp_path))
        get_stack_settings.cache_clear()
        settings = get_stack_settings()
        try:
            yield settings
        finally:
            cluster_service.down(settings)
            get_stack_settings.cache_clear()


def test_cluster_up_env_down(state: StackSettings) -> None:
    up = _cli("up", "--cluster")
    assert up.exit_code == 0, up.output
    env = _cli("env", "--cluster")
    assert env.exit_code == 0, env.output
    values = dict(line.removeprefix("export ").split("=", 1) for line in env.stdout.splitlines())
    nodes = values["SIDECAR_OPENSEARCH_URL"].split(",")
    assert len(nodes) == 3 and values["SIDECAR_OPENSEARCH_REPLICAS"] == "1"
    health = _get(f"{nodes[0]}/_cluster/health")
    assert health["status"] == "green" and health["number_of_nodes"] == 3
    assert len(_get(f"{values['SIDECAR_QDRANT_URL']}/cluster")["result"]["peers"]) == 3
    stack = cluster_service.running(state)
    assert stack is not None
    again = _cli("up", "--cluster")  # idempotent: the same nodes, found running
    assert again.exit_code == 0 and f"port base {stack.base}" in again.stdout
    down = _cli("down", "--cluster")
    assert down.exit_code == 0 and down.stdout.count(",") == 5, down.stdout  # six nodes
    assert cluster_service.running(state) is None
    assert not any(_listening(p) for p in ports(stack.base))  # (TIME_WAIT may still bind)
    assert "no cluster" in _cli("down", "--cluster").stdout
    assert _cli("env", "--cluster").exit_code == 1
