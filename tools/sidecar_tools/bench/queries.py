"""The fixed query mixes of the search stage, derived deterministically from the corpus.

Full-text queries exercise the operators users type (phrases, OR, negation, fields, dates,
prefixes, attachments) with words and senders that occur in the mailbox, so every query does
real work; semantic and hybrid queries are subject lines (free text), similar uses stored
messages. Same corpus and N → same queries, run after run.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime

from sidecar_tools.bench.dataset import Message

_STOP = set(
    re.findall(
        r"\w+",
        """about after again their there these those which would could should patch patches
    re fwd with from that this have been into when what where while""",
    )
)
_PREFIX = re.compile(r"^\s*((re|fwd?|aw)\s*:\s*|\[[^\]]*\]\s*)+", re.IGNORECASE)


def _subject(message: Message) -> str:
    meta = message.email.get("metadata") or {}
    return _PREFIX.sub("", str(meta.get("subject") or "")).strip()


def _sender(message: Message) -> str:
    return str(((message.email.get("metadata") or {}).get("from") or {}).get("email") or "")


def _day(ts: int) -> str:
    return datetime.fromtimestamp(ts, UTC).strftime("%Y-%m-%d")


def _vocabulary(messages: Sequence[Message]) -> list[str]:
    counts: Counter[str] = Counter()
    for m in messages:
        counts.update(w for w in re.findall(r"[a-z]{5,12}", _subject(m).lower()) if w not in _STOP)
    return [w for w, _ in counts.most_common(60)] or ["kernel", "build"]


def fulltext_queries(messages: Sequence[Message], mailbox: str, count: int = 50) -> list[str]:
    """``count`` queries cycling over twelve operator shapes."""
    own = [m for m in messages if m.ref.mailbox_id == mailbox] or list(messages)
    rng = random.Random(11)
    words = _vocabulary(own)
    senders = [s for s in (_sender(m) for m in own) if s] or ["nobody@example.org"]
    subjects = [s for s in (_subject(m) for m in own) if len(s.split()) >= 2] or ["a b"]
    shapes = [
        "{w}",
        "{w} {v}",
        '"{p}"',
        "from:{s}",
        "from:{s} {w}",
        "subject:{w}",
        "{w} OR {v}",
        "{w} -{v}",
        "{w} after:{d}",
        "({w} OR {v}) before:{d}",
        "{w4}*",
        "has:attachment {w}",
    ]
    queries = []
    for n in range(count):
        m = rng.choice(own)
        phrase = " ".join(re.findall(r"\w+", rng.choice(subjects))[:2]) or "a b"
        w = rng.choice(words)
        queries.append(
            shapes[n % len(shapes)].format(
                w=w, w4=w[:4], v=rng.choice(words), s=rng.choice(senders), p=phrase, d=_day(m.ts)
            )
        )
    return queries


def free_text_queries(messages: Sequence[Message], mailbox: str, count: int = 50) -> list[str]:
    """Subject lines as natural-language queries (semantic and hybrid modes)."""
    own = [m for m in messages if m.ref.mailbox_id == mailbox] or list(messages)
    rng = random.Random(13)
    # Words only: a subject's quotes, colons or parentheses would be operators in ``q``.
    words = (" ".join(re.findall(r"\w+", _subject(m))) for m in own)
    found = [s for s in words if len(s.split()) >= 3]
    return [s[:120] for s in rng.sample(found, min(count, len(found)))] or ["kernel build"]


def similar_keys(messages: Sequence[Message], mailbox: str, count: int = 50) -> list[str]:
    """Keys of stored messages that have a vector (non-blank forai)."""
    own = [m for m in messages if m.ref.mailbox_id == mailbox and (m.forai or "").strip()]
    rng = random.Random(17)
    return [m.ref.message_key for m in rng.sample(own, min(count, len(own)))]
