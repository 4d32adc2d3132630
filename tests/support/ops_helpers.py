"""Helpers for the operations tests: small mailboxes indexed by the real pipeline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from indexer.settings import Settings
from sidecar_tools.writer.files import load_file
from tests.support.pipeline_helpers import (
    export_stream,
    ingest_files,
    prepare_tables,
    wait_contacts,
    workers,
)

SAMPLE = Path(__file__).resolve().parents[2] / "tools" / "sidecar_tools" / "demo_data" / "sample-mailbox.jsonl"


def sample_subset(tmp_path: Path, count: int) -> Path:
    """The first ``count`` emails of the demo mailbox (distinct ``forai`` texts each)."""
    path = tmp_path / f"sample-{count}.jsonl"
    lines = SAMPLE.read_text(encoding="utf-8").splitlines(keepends=True)[:count]
    path.write_text("".join(lines), encoding="utf-8")
    return path


def index_mailboxes(settings: Settings, tmp_path: Path, sizes: dict[str, int]) -> Any:
    """Store each mailbox's first emails, index every stream record through real workers
    (both roles), and stop them (so the test may open the embedded Qdrant store)."""
    ddb = prepare_tables(settings)
    for mailbox, count in sizes.items():
        load_file(ddb, settings.table, sample_subset(tmp_path, count), mailbox)
    records = tmp_path / "stream.jsonl"
    export_stream(settings, records)
    with workers(settings):
        summary = ingest_files(settings, [str(records)], timeout=300)
        wait_contacts(settings, list(sizes))
    assert summary.dead_lettered == 0, summary
    return ddb
