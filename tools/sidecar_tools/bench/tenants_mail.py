"""``sidecar bench-tenants``' mail: who holds how many messages, and which messages.

The skew (:func:`mailbox_sizes`: the whale, the mid-size mailboxes, the long tail; the law is
in :mod:`sidecar_tools.bench.tenants`' docstring), the pool of distinct corpus emails, the
cheap perturbation that makes each reuse of an email a copy with other ids and other terms,
and the pool's vectors, embedded once and cached, with the noise a copy's vector gets. Pure
but for the embedder and the cache: the unit tests exercise the law here without a service.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import time
import zlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from indexer.adapters.embedding.embedder import build_embedder
from indexer.core.documents import MessageState, Participant, vector_target
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from sidecar_tools.bench import corpus as corpus_mod
from sidecar_tools.bench.tenants_options import Log
from sidecar_tools.writer.files import Rejected, read_emails
from sidecar_tools.writer.mapping import MessageItems, to_items
from sidecar_tools.writer.parse import InvalidEmail

NOISE_SIGMA = 0.01


# --- the skew ----------------------------------------------------------------------------------


def _spread(total: int, weights: Sequence[float], minimum: int) -> list[int]:
    """``total`` split by ``weights`` (largest remainder), each share at least ``minimum``."""
    if not weights:
        return []
    floor = minimum * len(weights)
    rest = max(0, total - floor)
    whole = sum(weights)
    raw = [rest * w / whole for w in weights]
    shares = [int(r) for r in raw]
    order = sorted(range(len(raw)), key=lambda i: raw[i] - shares[i], reverse=True)
    for i in order[: rest - sum(shares)]:
        shares[i] += 1
    return [s + minimum for s in shares]


def mailbox_sizes(messages: int, mailboxes: int, whale_share: float, mid_mailboxes: int,
                  mid_share: float) -> list[int]:
    """Messages per mailbox, the whale first, then the mid-size ones, then the tail (each
    group largest first); sums to ``messages``. See the module docstring for the law."""
    if mailboxes < 3 or messages < mailboxes:
        raise ValueError("bench-tenants needs at least 3 mailboxes and a message for each")
    whale = max(1, round(messages * whale_share))
    others = mailboxes - 1
    mids = max(1, min(mid_mailboxes, others // 3))
    tail = others - mids
    rest = messages - whale
    if rest < others:
        raise ValueError("the whale leaves fewer messages than there are other mailboxes")
    mid_total = max(mids, min(rest - tail, round(rest * mid_share)))
    mid = _spread(mid_total, [1 / math.sqrt(r + 1) for r in range(mids)], 1)
    small = _spread(rest - mid_total, [1 / (mids + 1 + r) for r in range(tail)], 1)
    return [whale, *mid, *small]


def searched(sizes: Sequence[int], mid_mailboxes: int) -> dict[str, int]:
    """Index of the mailbox searched for each class: the whale, the median mid-size one, the
    median of the tail (the tail's sizes fall, so its median is a typical small mailbox)."""
    mids = max(1, min(mid_mailboxes, (len(sizes) - 1) // 3))
    tail = len(sizes) - 1 - mids
    return {"whale": 0, "mid": 1 + mids // 2, "small": 1 + mids + tail // 2}


# --- the mail ----------------------------------------------------------------------------------


def load_pool(path: Path | None, distinct: int) -> list[dict[str, Any]]:
    """The first ``distinct`` emails of the corpus that the writer accepts."""
    source: Iterator[Any] = (
        iter(corpus_mod.generated_emails(distinct)) if path is None
        else (e for _, e in read_emails(path)))
    found: list[dict[str, Any]] = []
    for email in source:
        if isinstance(email, Rejected):
            continue
        try:
            to_items(email, "probe@example.org")
        except InvalidEmail:
            continue
        found.append(email)
        if len(found) >= distinct:
            break
    if not found:
        raise ValueError(f"no valid email in {path}")
    return found


_WORD = re.compile(r"\S+")


def perturbed(email: Mapping[str, Any], copy: int) -> dict[str, Any]:
    """The ``copy``-th copy of ``email`` (0: itself): its own message and thread ids, and one
    word in ten of ``clean`` dropped (which ones depends on ``copy``)."""
    if copy == 0:
        return dict(email)
    content = dict(email.get("content") or {})
    clean = content.get("clean")
    if isinstance(clean, str):
        content["clean"] = " ".join(
            w for w in _WORD.findall(clean) if zlib.crc32(f"{copy}:{w}".encode()) % 10)
    thread = dict(email.get("thread") or {}) if isinstance(email.get("thread"), Mapping) else None
    out = {**email, "content": content,
           "messageId": f"<c{copy}.{str(email['messageId']).strip('<>')}>",
           "threadId": f"<c{copy}.{str(email.get('threadId') or email['messageId']).strip('<>')}>"}
    if thread is not None and thread.get("inReplyTo"):
        thread["inReplyTo"] = f"<c{copy}.{str(thread['inReplyTo']).strip('<>')}>"
        out["thread"] = thread
    return out


def state_of(items: MessageItems, mailbox: str) -> MessageState:
    people = [Participant(str(p["role"]), str(p["email"]),
                          None if p.get("name") is None else str(p["name"]))
              for p in items.participants]
    return MessageState(MessageRef(mailbox, items.message_key), items.message, items.body, people)


def noisy(vector: np.ndarray, seed: str) -> list[float]:
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big"))
    moved = vector + rng.normal(0.0, NOISE_SIGMA, vector.shape).astype(np.float32)
    return [float(x) for x in moved / np.linalg.norm(moved)]


def base_vectors(settings: Settings, pool: Sequence[Mapping[str, Any]], cache: Path,
                  log: Log) -> tuple[list[np.ndarray | None], float]:
    """The pool's vectors (None: no embedded text), from the cache when it holds them;
    returns (vectors, seconds spent encoding, 0 when cached)."""
    texts = [vector_target(state_of(to_items(e, "x@example.org"), "x@example.org"),
                           settings.embed_recipe).text for e in pool]
    digest = hashlib.sha256(json.dumps(
        [settings.embed_model, settings.embed_max_tokens, settings.embed_dtype,
         settings.embed_runtime, texts],
        default=str).encode()).hexdigest()[:16]
    path = cache / f"vectors-{digest}.npy"
    wanted = [t for t in texts if t]
    began = time.perf_counter()
    if path.is_file():
        matrix = np.load(path)
        spent = 0.0
    else:
        log(f"tenants: embedding {len(wanted)} distinct texts (cached for later runs)")
        embedder = build_embedder(settings)
        rows: list[list[float]] = []
        for start in range(0, len(wanted), 64):
            rows += embedder.embed(wanted[start : start + 64])
        matrix = np.asarray(rows, dtype=np.float32)
        cache.mkdir(parents=True, exist_ok=True)
        np.save(path, matrix)
        spent = time.perf_counter() - began
    it = iter(matrix)
    return [next(it) if t else None for t in texts], spent
