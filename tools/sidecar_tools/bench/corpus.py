"""Which mail the benchmark uses: N messages of a real corpus, or a generated one.

The default corpus lives outside the repository (``../shared``); a fresh clone without it
still runs the benchmark on generated mail, so the harness never depends on that folder.
When N exceeds the corpus, it is replayed into further mailboxes (same messages, another
owner), which is how ``--messages 100000`` is built from a 41k-message corpus.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar_tools.writer.files import Rejected, read_emails

# The workplace's corpora sit beside the checkout (../shared); without them, generated mail.
_CHECKOUT = Path(__file__).resolve().parents[3]
DEFAULT_CORPUS = _CHECKOUT.parent / "shared" / "corpora" / "linux-mips.jsonl.gz"
MAILBOX = "bench-{n}@example.org"


@dataclass(frozen=True, slots=True)
class Corpus:
    """The selected emails written as one JSON-lines file per mailbox, and its identity."""

    key: str  # hash of the selection: names the table and the on-disk cache
    files: dict[str, Path]  # mailbox id -> NormalizedEmail JSON lines
    source: str  # corpus path, or "generated"
    messages: int


def _emails(path: Path | None, limit: int) -> list[Any]:
    """Up to ``limit`` parsed emails of the corpus (valid JSON lines only)."""
    if path is None:
        return list(generated_emails(limit))
    found: list[Any] = []
    for _, parsed in read_emails(path):
        if not isinstance(parsed, Rejected):
            found.append(parsed)
        if len(found) >= limit:
            break
    return found


def select(path: Path | None, messages: int, out_dir: Path) -> Corpus:
    """Write ``messages`` emails (replayed over mailboxes when needed) under ``out_dir``."""
    emails = _emails(path, messages)
    if not emails:
        raise ValueError(f"no valid email in {path}")
    digest = hashlib.sha256(f"{path}|{messages}".encode())
    per_mailbox: dict[str, list[str]] = {}
    for n in range(messages):
        mailbox = MAILBOX.format(n=n // len(emails))
        line = json.dumps(emails[n % len(emails)], ensure_ascii=False, sort_keys=True)
        per_mailbox.setdefault(mailbox, []).append(line)
        digest.update(line.encode())
    key = digest.hexdigest()[:12]
    files: dict[str, Path] = {}
    (out_dir / key).mkdir(parents=True, exist_ok=True)
    for mailbox, lines in per_mailbox.items():
        files[mailbox] = out_dir / key / f"{mailbox}.jsonl"
        if not files[mailbox].exists():
            files[mailbox].write_text("\n".join(lines) + "\n", encoding="utf-8")
    return Corpus(key, files, str(path) if path else "generated", messages)


def default_corpus() -> Path | None:
    """The shared real corpus when present, else None (generated mail)."""
    return DEFAULT_CORPUS if DEFAULT_CORPUS.exists() else None


_WORDS = re.findall(
    r"\w+",
    """kernel patch build mips driver memory cache review fix regression boot clock irq dma
module config release merge branch test failure warning timer network device register firmware
update support question thanks revert series stable cleanup header""",
)


def generated_emails(count: int, seed: int = 7) -> Iterator[dict[str, Any]]:
    """Deterministic list-like mail: threads of a few messages, a handful of senders."""
    rng = random.Random(seed)
    for n in range(count):
        root = n - n % 4
        subject = " ".join(_subject(root))
        body = " ".join(rng.choice(_WORDS) for _ in range(rng.randint(40, 400)))
        sender = f"dev{n % 17}@example.org"
        yield {
            "messageId": f"<gen{n}@bench.example>",
            "threadId": f"<gen{root}@bench.example>",
            "metadata": {
                "from": {"name": f"Dev {n % 17}", "email": sender},
                "to": [{"name": None, "email": "list@example.org"}],
                "cc": [],
                "bcc": [],
                "subject": ("Re: " if n != root else "") + subject,
                "date": f"2024-{1 + n % 12:02d}-{1 + n % 28:02d}T10:00:00Z",
                "timestamp": 1704103200 + n * 600,
            },
            "content": {"text": body, "clean": body, "forAI": f"{subject}. {body}"},
            "attachments": [],
            "processing": {"processedAt": "2024-12-01T00:00:00Z", "specVersion": "1.0"},
        }


def _subject(root: int) -> list[str]:
    return random.Random(root).sample(_WORDS, 5)
