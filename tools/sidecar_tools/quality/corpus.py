"""Corpus files for evaluation: whole-thread samples of a big corpus, written as JSON lines.

A sample must keep threads whole: operator queries are judged against every message that
should match, and same-thread recall needs each message's thread-mates present. Sampling is
a pure function of the file (threads in order of first appearance), so the expected results
committed in a query file stay valid for every run.
"""

from __future__ import annotations

import gzip
import json
from collections import OrderedDict
from pathlib import Path
from typing import Any

from sidecar_tools.writer.files import Rejected, read_emails


def read_corpus(path: Path) -> list[dict[str, Any]]:
    """Every parseable email of a JSON-lines file (plain or gzip), in file order."""
    return [e for _, e in read_emails(path) if not isinstance(e, Rejected)]


def sample_threads(
    emails: list[dict[str, Any]], max_messages: int, max_thread: int = 30
) -> list[dict[str, Any]]:
    """Whole threads, in order of first appearance, until ``max_messages`` is reached.

    Threads above ``max_thread`` messages are skipped so one long thread cannot fill the
    sample; the result never holds part of a thread.
    """
    threads: OrderedDict[str, list[dict[str, Any]]] = OrderedDict()
    for email in emails:
        threads.setdefault(str(email.get("threadId")), []).append(email)
    picked: list[dict[str, Any]] = []
    for members in threads.values():
        if len(members) > max_thread:
            continue
        if len(picked) + len(members) > max_messages:
            break
        picked.extend(members)
    return picked


def write_corpus(emails: list[dict[str, Any]], path: Path) -> Path:
    """The emails as gzipped JSON lines (what the store writer loads)."""
    with gzip.open(path, "wt", encoding="utf-8") as out:
        for email in emails:
            out.write(json.dumps(email, ensure_ascii=False) + "\n")
    return path


def corpus_file(path: Path, sample: int | None, workdir: Path) -> Path:
    """``path`` itself, or a whole-thread sample of it written under ``workdir``."""
    if sample is None:
        return path
    emails = sample_threads(read_corpus(path), sample)
    return write_corpus(emails, workdir / f"{path.name.split('.')[0]}-sample-{sample}.jsonl.gz")
