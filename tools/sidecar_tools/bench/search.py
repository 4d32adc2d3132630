"""Search latency: the API under concurrent clients, beside the raw engine calls it makes.

Raw figures run the same queries straight against the engines (OpenSearch ``_search`` with
the body the API builds, Qdrant search with the same filter, the query's encoding, and the
``BatchGetItem`` of one page), with the same number of concurrent clients, so the difference
is the API's own overhead. Raw calls run in this process, which then must release the
embedded Qdrant store before the API (its single owner) starts.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from indexer.adapters import factories
from indexer.adapters.embedding.embedder import Embedder
from indexer.core.documents import point_id
from indexer.core.items import message_sk, thread_pk
from indexer.core.plan import MessageRef
from indexer.settings import Settings, to_env
from search_api.auth import token_hash
from search_api.query import (
    VectorFilter,
    build_search_body,
    page_highlight_body,
    parse,
    vector_filter,
)
from search_api.query import more_like_this as mlt
from search_api.query.more_like_this import LIKED_BODY_ANALYZER
from search_api.service import DEPTH, HYBRID
from search_api.similar import DEFAULT_TUNING
from search_api.vector_search import to_filter
from sidecar_tools.bench.dataset import Message
from sidecar_tools.bench.timing import Latency, closed_loop, peak_rss_mib

MODES = ("fulltext", "semantic", "hybrid", "similar")
PAGE = 20


@dataclass(frozen=True)
class Workload:
    mailbox: str
    fulltext: list[str]
    free_text: list[str]
    similar: list[str]


def _os_search(settings: Settings, mailbox: str, q: str, size: int = PAGE) -> bool:
    index = factories.fulltext_index(settings)
    body = build_search_body(
        parse(q),
        mailbox,
        size=size,
        sort_by_date=False,
        search_after=None,
        collapse_threads=False,
        offset=0,
    )
    index.client.search(index=index.alias, body=body, routing=mailbox)
    return True


def _hybrid_text_leg(settings: Settings, mailbox: str, q: str, *, page_only: bool) -> bool:
    """Hybrid's relaxed full-text leg (``HYBRID.text_depth`` candidates, any one free word):
    before, all of them highlighted in the one request; now fetched without snippets, then
    only the returned page's snippets in a second, small request (as the API does)."""
    index = factories.fulltext_index(settings)
    node = parse(q)
    body = build_search_body(
        node, mailbox, size=HYBRID.text_depth, sort_by_date=False, search_after=None,
        collapse_threads=False, offset=0, any_words=HYBRID.any_words, highlight=not page_only,
    )
    found = index.client.search(index=index.alias, body=body, routing=mailbox)["hits"]["hits"]
    if page_only and found:
        keys = [h["_source"]["message_key"] for h in found[:PAGE]]
        index.client.search(index=index.alias, body=page_highlight_body(node, mailbox, keys),
                            routing=mailbox)
    return True


def _qdrant_search(settings: Settings, mailbox: str, q: str, vector: list[float]) -> bool:
    flt = to_filter(vector_filter(parse(q), mailbox))
    factories.vector_index(settings).query(vector, flt, DEPTH)
    return True


def raw_calls(
    settings: Settings, embedder: Embedder, work: Workload, messages: Sequence[Message]
) -> dict[str, tuple[Callable[[Any], bool], list[Any]]]:
    """Each raw engine call by name, with the inputs it cycles over."""
    mb = work.mailbox
    vectors = {q: embedder.embed([q])[0] for q in work.free_text}
    own = [m for m in messages if m.ref.mailbox_id == mb]
    pages = [own[i : i + PAGE] for i in range(0, min(len(own), 50 * PAGE), PAGE)]
    store = factories.store(settings)

    def batch_get(page: list[Message], consistent: bool = True) -> bool:
        keys = [(thread_pk(mb, m.thread_key), message_sk(m.ts, m.ref.message_key)) for m in page]
        return len(store.get_items(keys, consistent=consistent)) == len(page)

    def similar(key: str) -> bool:
        point = factories.vector_index(settings).point(MessageRef(mb, key))
        if point is None or point.vector is None:
            return False
        thread = str((point.payload or {}).get("thread_key"))
        flt = VectorFilter(mb, exclude_message_keys=(key,), exclude_thread_keys=(thread,))
        factories.vector_index(settings).query(list(point.vector), to_filter(flt), PAGE)
        return True

    threads = {m.ref.message_key: m.thread_key for m in own}
    # Asked once, as the API caches it (its answer is the read index's mapping).
    liked = (LIKED_BODY_ANALYZER
             if factories.fulltext_index(settings).has_analyzer(LIKED_BODY_ANALYZER) else None)

    def more_like_this(key: str) -> bool:
        """The engine requests of the API's term rankings of "similar" (the liked message's
        term vectors, its terms counted in the mailbox, the body+subject and subject-only
        queries), as :func:`search_api.similar.liked_terms` and ``by_terms`` send them."""
        index = factories.fulltext_index(settings)
        doc_id = point_id(MessageRef(mb, key))
        tf = mlt.liked_terms(index.term_vectors(
            mb, doc_id, mlt.term_vectors_request(doc_id, mlt.MLT_FIELDS, liked)))
        chosen = mlt.candidates(tf)
        if not chosen:  # no terms (no body and subject): the API asks nothing more either
            return True
        counts = index.search_response(mb, mlt.counts_body(mb, chosen))
        best = mlt.best_terms(tf, chosen, counts)
        for fields in (mlt.MLT_FIELDS, ("subject",)):
            terms = [ft for ft in best if ft[0] in fields]
            if terms:
                body = mlt.terms_body(mailbox_id=mb, doc_id=doc_id, thread_key=threads.get(key),
                                      terms=terms, size=DEFAULT_TUNING.depth)
                index.client.search(index=index.alias, body=body, routing=mb)
        return True

    return {
        "opensearch_search": (lambda q: _os_search(settings, mb, q), work.fulltext),
        "opensearch_mlt": (more_like_this, work.similar),
        "encode_query": (lambda q: bool(embedder.embed([q])), work.free_text),
        "qdrant_search": (lambda q: _qdrant_search(settings, mb, q, vectors[q]), work.free_text),
        "qdrant_similar": (similar, work.similar),
        "batch_get_page": (batch_get, pages),
        # The same page eventually consistent (the API's join now; half the read units).
        "batch_get_page_eventual": (lambda page: batch_get(page, False), pages),
        # Hybrid's full-text leg before / after highlighting only the returned page.
        "hybrid_text_highlight_all": (
            lambda q: _hybrid_text_leg(settings, mb, q, page_only=False), work.free_text),
        "hybrid_text_highlight_page": (
            lambda q: _hybrid_text_leg(settings, mb, q, page_only=True), work.free_text),
        # The read alias's resolution, once per semantic/hybrid request before its cache.
        "qdrant_aliases": (lambda _: bool(factories.vector_index(settings).store.aliases() or 1),
                           work.free_text),
    }


def measure_raw(
    settings: Settings,
    embedder: Embedder,
    work: Workload,
    messages: Sequence[Message],
    *,
    clients: int,
    seconds: float,
) -> dict[str, Latency]:
    """Closed-loop latency of every raw call (this process opens the embedded store)."""
    calls = raw_calls(settings, embedder, work, messages)
    try:
        return {
            name: closed_loop(fn, inputs, clients=clients, seconds=seconds)
            for name, (fn, inputs) in calls.items()
        }
    finally:
        factories.vector_index(settings).close()
        factories.vector_index.cache_clear()


def _free_port() -> int:
    """A port nobody listens on now: another API answering /healthz must not pass for ours."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ApiProcess:
    proc: subprocess.Popen[bytes]
    url: str
    token: str


# The bench's clients stand for many users behind one bench token: the per-caller gates
# (search_api/limits.py) would refuse them as one caller, so they are lifted for its API; what
# is measured is the search, not the gate.
BENCH_LIMITS = {
    "SIDECAR_API_EXPENSIVE_PER_TOKEN": "64",
    "SIDECAR_API_EXPENSIVE_PER_SECOND": "1000",
    "SIDECAR_API_EXPENSIVE_IN_FLIGHT": "256",
    "SIDECAR_API_REQUESTS_PER_SECOND": "100000",
}


def start_api(
    settings: Settings,
    mailbox: str,
    port: int,
    log: Path,
    *,
    argv: Sequence[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> ApiProcess:
    """``sidecar serve`` (owner of the embedded store) with a bench-only token, its per-caller
    limits lifted (:data:`BENCH_LIMITS`). ``argv``: the command instead of the plain
    ``sidecar serve`` (a bench that watches its Celery tasks runs it under its probe);
    ``env``: further variables of the process."""
    port = port or _free_port()
    token = "bench-" + os.urandom(12).hex()
    child_env = {
        **os.environ,
        **to_env(settings),
        "SIDECAR_API_PORT": str(port),
        "SIDECAR_API_TOKENS": json.dumps({token_hash(token): [mailbox]}),
        "HF_HUB_OFFLINE": "1",
        **BENCH_LIMITS,
        **(env or {}),
    }
    with log.open("ab") as sink:
        proc = subprocess.Popen(
            list(argv or [sys.executable, "-m", "indexer.cli.main", "serve"]),
            env=child_env,
            stdout=sink,
            stderr=sink,
            start_new_session=True,
        )
    api = ApiProcess(proc, f"http://127.0.0.1:{port}", token)
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            if httpx.get(api.url + "/healthz", timeout=2).status_code == 200:
                return api
        except httpx.HTTPError:
            time.sleep(0.3)
    proc.kill()
    raise RuntimeError(f"the API did not start; see {log}")


def api_call(api: ApiProcess, work: Workload, mode: str) -> Callable[[Any], bool]:
    """One API request of ``mode``; each client thread keeps its own HTTP connection."""
    local = threading.local()
    headers = {"Authorization": f"Bearer {api.token}"}
    base = f"{api.url}/v1/mailboxes/{work.mailbox}"

    def call(arg: str) -> bool:
        client = getattr(local, "client", None) or httpx.Client(headers=headers, timeout=60)
        local.client = client
        if mode == "similar":
            response = client.get(f"{base}/messages/{arg}/similar", params={"limit": PAGE})
        else:
            response = client.get(f"{base}/search", params={"q": arg, "mode": mode, "limit": PAGE})
        return response.status_code == 200

    return call


def measure_api(
    api: ApiProcess, work: Workload, *, clients: int, seconds: float
) -> dict[str, Latency]:
    inputs = {
        "fulltext": work.fulltext,
        "semantic": work.free_text,
        "hybrid": work.free_text,
        "similar": work.similar,
    }
    results = {}
    for mode in MODES:
        call = api_call(api, work, mode)
        for arg in inputs[mode][:3]:  # warm-up: the model's first query, connections
            call(arg)
        results[mode] = closed_loop(call, inputs[mode], clients=clients, seconds=seconds)
    return results


def stop_api(api: ApiProcess) -> float:
    """Stop the API; returns its peak RSS (MiB), read before it exits."""
    peak = peak_rss_mib(api.proc.pid)
    api.proc.terminate()
    try:
        api.proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        api.proc.kill()
        api.proc.wait()
    return peak
