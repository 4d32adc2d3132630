"""``sidecar bench-query-stream`` at a tiny scale on the real stack: the structure, not the
latencies (a 3-second phase on this shared 2-core machine says nothing about a p99).

Run as a user runs it: 30 messages of the repository's linux-mips-4k corpus seeded into the
searched mailbox and indexed by the real ``sidecar tail``, full-text worker and vectors consumer
of the layout (Edge: ``sidecar serve`` itself; server: a Qdrant server and a vectors worker),
8 clients searching semantically through the API for 3 s quiet and 3 s while 6 more messages
are stored and indexed. Both phases must be answered without an error, the API's own request
histogram must have seen exactly the clients' calls of each phase, the stream phase must have
indexed documents in both stages, and the run must leave no index behind.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from indexer.adapters.opensearch.index import build_client
from indexer.settings import Settings

pytestmark = [pytest.mark.stack, pytest.mark.slow]

CORPUS = Path(__file__).resolve().parents[1] / "data" / "corpora" / "linux-mips-4k.jsonl.gz"


@pytest.mark.timeout(600)
@pytest.mark.parametrize("layout", ["edge", pytest.param("server",
                                                         marks=pytest.mark.qdrant_server)])
def test_both_phases_are_answered_and_the_stream_is_indexed(layout: str, tmp_path: Path) -> None:
    from indexer.cli.main import app

    out = tmp_path / "run.json"
    args = ["bench-query-stream", "--layout", layout, "--seconds", "3", "--rate", "2",
            "--seed-messages", "30", "--corpus", str(CORPUS), "--json", str(out),
            "--workdir", str(tmp_path / "work")]
    done = CliRunner().invoke(app, args)
    assert done.exit_code == 0, done.output
    result = json.loads(out.read_text(encoding="utf-8"))
    assert result["layout"] == layout and result["searched_messages"] == 30
    assert result["settled"] is True  # no seed task left running into the quiet phase
    assert set(result["phases"]) == {"quiet", "stream"}
    for name, phase in result["phases"].items():
        api = phase["api"]
        assert api["calls"] > 0 and api["errors"] == 0, (name, api)
        assert api["clients"] == 8
        # every client call of the phase, and only those, is in the API's own histogram
        assert phase["server_side"]["semantic_request"]["n"] == api["calls"], (name, phase)
        assert phase["server_side"]["embed_call"]["n"] >= 1, (name, phase)
    stream = result["phases"]["stream"]
    assert stream["written"] == 6 and not stream["write_failures"], stream
    assert stream["indexed"]["fulltext"] > 0 and stream["indexed"]["vectors"] > 0, stream
    # Edge: the API process itself applied the vectors of the stream (it is the consumer)
    assert (stream["server_side"]["vectors_applied_in_api"] > 0) == (layout == "edge"), stream
    assert f"| stream | {stream['api']['calls']} | 0 |" in done.output
    left = build_client(Settings()).indices.get(index=f"qstream-{result['run_id']}*",
                                                ignore_unavailable=True)
    assert not left, sorted(left)
