"""``sidecar bench-tenants``: a provider's store — many mailboxes, a whale, a long tail.

Every other search figure comes from one mailbox searched beside copies of itself. This one
builds an index of ``messages`` over ``mailboxes`` with a skew (:func:`mailbox_sizes`):

- **the whale**: mailbox 0 holds ``whale_share`` of all messages;
- **mid-size**: the next ``mid_mailboxes`` (default 300, at most a third of the others) share
  ``mid_share`` (default 0.5) of the rest, by a mild Zipf law (weight ``1/rank**0.5``);
- **the long tail**: every other mailbox shares what is left by a Zipf law continued after
  the mid-size ranks (weight ``1/(mids + 1 + rank)``), at least one message each.

Mail is real (a corpus of NormalizedEmail JSON lines): each mailbox takes the next slice of
the corpus's first ``distinct`` valid emails, cycled, so threads stay together. An email used
for the ``k``-th time (``k`` ≥ 1) is a *copy*: other message and thread ids (so other keys),
the mailbox's id, and a cheap perturbation of its text (each word of ``clean`` dropped when a
hash of (word, k) falls in one tenth), so term statistics are not ``k`` identical copies. The
vectors of the ``distinct`` texts are embedded once with the shipped encoder (cached on disk
per corpus selection and model); a copy's vector is the original plus Gaussian noise
(σ = 0.01 per dimension, cosine ≈ 0.98 to it), renormalized, so no two points are equal.

The documents are written with the full-text adapter (``apply``: the pipeline's bulk path) into
an index of ``shards`` primaries, the points with the vector index's ``upsert`` on the chosen
backend (embedded Edge, or a Qdrant server: ``SIDECAR_QDRANT_URL`` or the shared binary), the
searched mailboxes' hot rows (their Message items) into a table of their own, so the API's
join reads real rows. Then, per mailbox class (the whale; the median mid-size
mailbox; the median tail mailbox) and mode, through ``sidecar serve``:

- the fraction of searches whose OpenSearch answers ran on exactly one shard (the API behind
  :class:`~sidecar_tools.bench.shard_probe.ShardProbe`; every query of every class once);
- p50/p95/p99 with one client, then throughput with ``clients`` clients and the CPU seconds
  per request (API process + OpenSearch node + Qdrant server; the moto stand-in for DynamoDB
  is left out; the shared node's CPU includes whatever else ran);
- recall@10 of the vector search the API makes (depth 200, top 10 kept) against an exact
  search of the same mailbox, for the int8 layout and the float32 one built beside it;
- OpenSearch ``store.size`` per message, Qdrant RSS and disk per point for both layouts
  (:func:`edge_rss` / the server process), and the time each build took.

``--json OUT`` writes :func:`run`'s dict; its fields are listed in docs/operations/capacity.md.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import numpy as np
from boto3.dynamodb.types import TypeSerializer

from indexer.adapters import factories
from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.tables import init_tables
from indexer.adapters.embedding.embedder import build_embedder
from indexer.adapters.opensearch.index import build_client as build_opensearch
from indexer.adapters.qdrant.index import VectorIndex, build_store
from indexer.core.documents import (
    MessageState,
    Participant,
    search_document,
    vector_target,
)
from indexer.core.plan import MessageRef
from indexer.core.vectors import PointWrite, VectorStore, match
from indexer.settings import Settings, to_env
from search_api.auth import token_hash
from search_api.service import DEPTH
from sidecar_tools.bench import corpus as corpus_mod
from sidecar_tools.bench import queries
from sidecar_tools.bench.dataset import Message
from sidecar_tools.bench.shard_probe import ShardProbe, one_shard_fraction
from sidecar_tools.bench.timing import closed_loop, peak_rss_mib, percentile
from sidecar_tools.writer.files import Rejected, read_emails
from sidecar_tools.writer.mapping import MessageItems, to_items
from sidecar_tools.writer.parse import InvalidEmail

Log = Callable[[str], None]
CLASSES = ("whale", "mid", "small")
MODES = ("fulltext", "semantic", "hybrid", "similar")
PAGE = 20
NOISE_SIGMA = 0.01
DOC_BATCH = 2_000
PURGE_WINDOW_S = 60.0
POINT_BATCH = 512
_SER = TypeSerializer()


@dataclass(frozen=True)
class TenantOptions:
    """What to build and how long to measure (see the module docstring)."""

    corpus: Path | None
    messages: int = 20_000
    mailboxes: int = 1_000
    whale_share: float = 0.1
    mid_mailboxes: int = 300
    mid_share: float = 0.5
    distinct: int = 2_000
    backend: str = "edge"  # or "server"
    shards: int = 4
    clients: int = 8
    search_seconds: float = 10.0
    queries: int = 20  # per mode and class
    compare_float32: bool = True
    workdir: Path = Path(".sidecar/bench")
    # purge the whale while the mid-size and small mailboxes are searched (server backend
    # only: the embedded store's one owner is the API, so a purge cannot run beside it)
    purge: bool = False
    # recall@10 per class: one query missing a cluster of near-copies moves 20 queries' mean
    # by 0.05, 200 queries' by 0.005 (the 0.99 target needs the finer step)
    recall_queries: int = 200


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


def _pool(path: Path | None, distinct: int) -> list[dict[str, Any]]:
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


def _state(items: MessageItems, mailbox: str) -> MessageState:
    people = [Participant(str(p["role"]), str(p["email"]),
                          None if p.get("name") is None else str(p["name"]))
              for p in items.participants]
    return MessageState(MessageRef(mailbox, items.message_key), items.message, items.body, people)


def _noisy(vector: np.ndarray, seed: str) -> list[float]:
    rng = np.random.default_rng(int.from_bytes(hashlib.sha256(seed.encode()).digest()[:8], "big"))
    moved = vector + rng.normal(0.0, NOISE_SIGMA, vector.shape).astype(np.float32)
    return [float(x) for x in moved / np.linalg.norm(moved)]


def _base_vectors(settings: Settings, pool: Sequence[Mapping[str, Any]], cache: Path,
                  log: Log) -> tuple[list[np.ndarray | None], float]:
    """The pool's vectors (None: no embedded text), from the cache when it holds them;
    returns (vectors, seconds spent encoding, 0 when cached)."""
    texts = [vector_target(_state(to_items(e, "x@example.org"), "x@example.org"),
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


@dataclass
class Built:
    """What the build left: the searched mailboxes, their messages and rows, the timings."""

    mailboxes: dict[str, str]
    sizes: dict[str, int]
    messages: dict[str, list[Message]]
    rows: list[MessageItems] = field(default_factory=list)
    documents: int = 0
    points: int = 0
    fulltext_s: float = 0.0
    vectors_s: float = 0.0


def build(settings: Settings, opts: TenantOptions, pool: Sequence[Mapping[str, Any]],
          vectors: Sequence[np.ndarray | None], run_id: str, log: Log) -> Built:
    """Write every mailbox's documents and points; keep the searched mailboxes' items."""
    sizes = mailbox_sizes(opts.messages, opts.mailboxes, opts.whale_share, opts.mid_mailboxes,
                          opts.mid_share)
    chosen = searched(sizes, opts.mid_mailboxes)
    box = [f"t{n:05d}-{run_id}@tenants.example" for n in range(len(sizes))]
    out = Built({c: box[i] for c, i in chosen.items()}, {c: sizes[i] for c, i in chosen.items()},
                {c: [] for c in chosen})
    by_index = {i: c for c, i in chosen.items()}
    fulltext = factories.fulltext_index(settings)
    index = factories.vector_index(settings)
    docs: dict[MessageRef, Mapping[str, Any] | None] = {}
    points: list[tuple[MessageRef, Sequence[float], Mapping[str, Any]]] = []
    used = [0] * len(pool)
    cursor = 0

    def write_docs() -> None:
        began = time.perf_counter()
        rejected = fulltext.apply(docs)
        if rejected:
            raise RuntimeError(f"OpenSearch rejected {len(rejected)} documents: "
                               f"{next(iter(rejected.values()))}")
        out.documents += len(docs)
        out.fulltext_s += time.perf_counter() - began
        docs.clear()

    def write_points() -> None:
        began = time.perf_counter()
        index.upsert(points)
        index.flush()
        out.points += len(points)
        out.vectors_s += time.perf_counter() - began
        points.clear()

    for n, size in enumerate(sizes):
        for _ in range(size):
            slot = cursor % len(pool)
            cursor += 1
            copy = used[slot]
            used[slot] += 1
            items = to_items(perturbed(pool[slot], copy), box[n])
            state = _state(items, box[n])
            docs[state.ref] = search_document(state)
            target = vector_target(state, settings.embed_recipe)
            base = vectors[slot]
            if target.text is not None and base is not None:
                vector = ([float(x) for x in base] if copy == 0
                          else _noisy(base, f"{copy}|{box[n]}|{slot}"))
                points.append((state.ref, vector, target.payload))
            if n in by_index:
                out.rows.append(items)
                message = items.message
                forai = message.get("forai")
                out.messages[by_index[n]].append(Message(
                    state.ref, str(message["thread_key"]), int(message["ts"]),
                    forai if isinstance(forai, str) else None, perturbed(pool[slot], copy)))
            if len(docs) >= DOC_BATCH:
                write_docs()
            if len(points) >= POINT_BATCH:
                write_points()
        if n % 200 == 0:
            log(f"tenants: {n + 1}/{len(sizes)} mailboxes, {out.documents} documents written")
    if docs:
        write_docs()
    if points:
        write_points()
    began = time.perf_counter()
    fulltext.refresh()
    out.fulltext_s += time.perf_counter() - began
    return out


def write_rows(settings: Settings, rows: Sequence[MessageItems]) -> float:
    """The searched mailboxes' Message items (the hot rows: the only items the API's join
    reads, by key) into the table, in batches of 25; returns seconds. The Body, participant
    and pointer items are left out: no search reads them, and moto on 2 busy cores writes
    ~10 messages/s whole."""
    began = time.perf_counter()
    ddb = aws.client(settings, "dynamodb")
    init_tables(ddb, settings, mail_table=True)  # as `sidecar init --mail-table`: mail + state
    ddb.get_waiter("table_exists").wait(TableName=settings.table)
    requests = [{"PutRequest": {"Item": {k: _SER.serialize(v) for k, v in item.items()}}}
                for items in rows
                for item in (items.message,)]
    for start in range(0, len(requests), 25):
        pending = requests[start : start + 25]
        for attempt in range(10):
            left = ddb.batch_write_item(RequestItems={settings.table: pending})
            pending = left.get("UnprocessedItems", {}).get(settings.table, [])
            if not pending:
                break
            time.sleep(0.05 * 2**attempt)
        else:
            raise RuntimeError("moto kept items unprocessed")
    return time.perf_counter() - began


# --- the vector layouts ------------------------------------------------------------------------


def _settle(store: VectorStore, collection: str) -> float:
    began = time.perf_counter()
    store.settle(collection)  # type: ignore[attr-defined]
    return time.perf_counter() - began


def copy_float32(source: VectorStore, collection: str, target: VectorStore, name: str,
                 dim: int) -> tuple[int, float]:
    """Every point of ``collection`` into ``name`` of the float32 layout (the layout before
    issue 39) on ``target``; returns (points, seconds including the index build)."""
    began, copied = time.perf_counter(), 0
    target.create(name, dim, ("thread_key", "message_key"))
    for page in source.scroll(collection, None, None, with_vector=True):
        target.upsert(name, [PointWrite(p.id, p.vector or [], p.payload) for p in page])
        target.flush()
        copied += len(page)
    _settle(target, name)
    return copied, time.perf_counter() - began


def recall(store: VectorStore, collection: str, mailbox: str,
           vectors: Sequence[Sequence[float]]) -> dict[str, float]:
    """recall@10 of the API's vector search (depth ``DEPTH``, its top 10) against an exact
    search of the same mailbox, and both searches' p50 (ms)."""
    found, fast, slow = [], [], []
    flt = match("mailbox_id", mailbox)
    for vector in vectors:
        began = time.perf_counter()
        approx = [h.id for h in store.search(collection, vector, flt, DEPTH)][:10]
        fast.append(time.perf_counter() - began)
        began = time.perf_counter()
        exact = [h.id for h in store.search(collection, vector, flt, 10,  # type: ignore[call-arg]
                                            exact=True)]
        slow.append(time.perf_counter() - began)
        if exact:
            found.append(len(set(approx) & set(exact)) / len(exact))
    return {"recall_at_10": sum(found) / len(found) if found else float("nan"),
            "queries": len(found),
            "search_p50_ms": percentile([s * 1000 for s in fast], 50),
            "exact_p50_ms": percentile([s * 1000 for s in slow], 50)}


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


_RSS_CHILD = """
import json, sys
from pathlib import Path
from indexer.adapters.qdrant.edge import EdgeStore
from indexer.core.vectors import match
def rss():
    found = {}
    for line in open('/proc/self/status'):
        if line.startswith(('VmRSS:', 'RssAnon:', 'RssFile:')):
            name, value = line.split(':')
            found[name] = int(value.split()[0]) * 1024
    return found
args = json.loads(Path(sys.argv[1]).read_text())
store = EdgeStore(Path(args['root']))
before = rss()
for vector in args['vectors']:
    for box in args['mailboxes']:
        store.search(args['collection'], vector, match('mailbox_id', box), args['depth'])
after = rss()
print(json.dumps({'before': before['VmRSS'], 'after': after['VmRSS'],
                  'anon': after['RssAnon'] - before['RssAnon'],
                  'file': after['RssFile'] - before['RssFile']}))
store.close()
"""


def edge_rss(root: Path, collection: str, mailboxes: Sequence[str],
             vectors: Sequence[Sequence[float]]) -> dict[str, int]:
    """RSS (bytes) a fresh process gains by opening the Edge shard and searching every
    mailbox class with every query vector (the steady state of a searching owner), and how
    much of it is anonymous memory (``rss_anon``: heap, int8 vectors kept in RAM) and
    file-backed pages (``rss_file``: mmapped segments and WAL, page cache the kernel can drop
    and read again)."""
    args = root.parent / f".rss-{root.name}.json"  # the vectors are too long for argv
    args.write_text(json.dumps({"root": str(root), "collection": collection,
                                "mailboxes": list(mailboxes),
                                "vectors": [list(v) for v in vectors], "depth": DEPTH}))
    done = subprocess.run([sys.executable, "-c", _RSS_CHILD, str(args)], capture_output=True,
                          text=True, check=True, timeout=900)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return {"rss_before": int(found["before"]), "rss_after": int(found["after"]),
            "rss_anon": int(found["anon"]), "rss_file": int(found["file"])}


def _proc_rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    return 0


def _proc_cpu_s(pid: int) -> float:
    """utime + stime of ``pid`` and its children that were waited for (seconds)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / os.sysconf("SC_CLK_TCK")


# --- the API -----------------------------------------------------------------------------------


@dataclass
class ApiProcess:
    proc: subprocess.Popen[bytes]
    url: str
    token: str


def _free_port() -> int:
    """A port nobody listens on now (another API answering /healthz must not pass for ours)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


def start_api(settings: Settings, mailboxes: Sequence[str], log: Path) -> ApiProcess:
    """``sidecar serve`` with a bench-only token for the searched mailboxes, its per-caller
    limits lifted (the clients stand for many users: :data:`search.BENCH_LIMITS`)."""
    from sidecar_tools.bench.search import BENCH_LIMITS

    port = _free_port()
    token = "bench-" + os.urandom(12).hex()
    env = {**os.environ, **to_env(settings), "SIDECAR_API_PORT": str(port),
           "SIDECAR_API_TOKENS": json.dumps({token_hash(token): list(mailboxes)}),
           "HF_HUB_OFFLINE": "1", **BENCH_LIMITS}
    with log.open("ab") as sink:
        proc = subprocess.Popen([sys.executable, "-m", "indexer.cli.main", "serve"], env=env,
                                stdout=sink, stderr=sink, start_new_session=True)
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


@dataclass(frozen=True)
class ClassWork:
    mailbox: str
    inputs: dict[str, list[str]]  # mode -> queries (similar: message keys)


def workloads(built: Built, count: int) -> dict[str, ClassWork]:
    out = {}
    for cls, mailbox in built.mailboxes.items():
        own = built.messages[cls]
        out[cls] = ClassWork(mailbox, {
            "fulltext": queries.fulltext_queries(own, mailbox, count),
            "semantic": queries.free_text_queries(own, mailbox, count),
            "hybrid": queries.free_text_queries(own, mailbox, count),
            "similar": queries.similar_keys(own, mailbox, count),
        })
    return out


def _caller(api: ApiProcess, work: ClassWork, mode: str,
            answered: list[int] | None = None) -> Callable[[Any], bool]:
    """One API request of ``mode`` on the class's mailbox; ``answered`` counts the requests
    that returned at least one hit."""
    local = threading.local()
    base = f"{api.url}/v1/mailboxes/{work.mailbox}"

    def call(arg: str) -> bool:
        client = getattr(local, "client", None)
        if client is None:
            client = local.client = httpx.Client(
                headers={"Authorization": f"Bearer {api.token}"}, timeout=120)
        if mode == "similar":
            response = client.get(f"{base}/messages/{arg}/similar", params={"limit": PAGE})
        else:
            response = client.get(f"{base}/search", params={"q": arg, "mode": mode,
                                                            "limit": PAGE})
        if response.status_code != 200:
            return False
        if answered is not None and response.json().get("hits"):
            answered[0] += 1
        return True

    return call


def probe_shards(settings: Settings, work: Mapping[str, ClassWork], run_dir: Path,
                 log: Log) -> dict[str, Any]:
    """Every query of every class and mode once, through an API whose OpenSearch is a
    :class:`ShardProbe`: shards per search, and whether each class was answered."""
    probe = ShardProbe(settings.opensearch_url)
    api = start_api(settings.model_copy(update={"opensearch_url": probe.url}),
                    [w.mailbox for w in work.values()], run_dir / "api-probe.log")
    out: dict[str, Any] = {}
    try:
        for cls, w in work.items():
            for mode in MODES:
                answered, errors = [0], 0
                call = _caller(api, w, mode, answered)
                probe.take()
                for arg in w.inputs[mode]:
                    errors += 0 if call(arg) else 1
                seen = probe.take()
                out[f"{mode}/{cls}"] = {
                    "requests": len(w.inputs[mode]), "errors": errors,
                    "answered": answered[0], "opensearch_searches": len(seen),
                    "one_shard_fraction": one_shard_fraction(seen),
                    "max_shards": max((s.shards for s in seen), default=0)}
        log("tenants: shard probe done")
    finally:
        stop_api(api)
        probe.close()
    return out


def _node_cpu_s(settings: Settings) -> float:
    stats = build_opensearch(settings).nodes.stats(metric="process")
    return float(sum(n["process"]["cpu"]["total_in_millis"]
                     for n in stats["nodes"].values())) / 1000


def measure_latency(settings: Settings, work: Mapping[str, ClassWork], opts: TenantOptions,
                    run_dir: Path, server_pid: int | None, log: Log) -> dict[str, Any]:
    """Per class and mode: 1 client for ``search_seconds``, then ``clients`` clients with the
    CPU seconds the API, the OpenSearch node and a Qdrant server spent per request."""
    api = start_api(settings, [w.mailbox for w in work.values()], run_dir / "api.log")
    out: dict[str, Any] = {}
    try:
        for cls, w in work.items():
            for mode in MODES:
                call = _caller(api, w, mode)
                for arg in w.inputs[mode][:3]:  # warm-up
                    call(arg)
                one = closed_loop(call, w.inputs[mode], clients=1, seconds=opts.search_seconds)
                cpu0 = _cpu(settings, api.proc.pid, server_pid)
                many = closed_loop(call, w.inputs[mode], clients=opts.clients,
                                   seconds=opts.search_seconds)
                cpu1 = _cpu(settings, api.proc.pid, server_pid)
                spent = {k: cpu1[k] - cpu0[k] for k in cpu0}
                out[f"{mode}/{cls}"] = {
                    "one_client": one.as_json(), "many_clients": many.as_json(),
                    "cpu_s_per_request": {k: v / max(many.calls, 1) for k, v in spent.items()},
                }
                log(f"tenants: {mode}/{cls}: p99 {one.p99_ms:.1f} ms (1 client), "
                    f"{many.rps:.1f} req/s ({opts.clients} clients)")
    finally:
        out["api_rss_mib"] = stop_api(api)
    return out


# per class, each call of one client: (seconds into the window, ms)
Calls = dict[str, list[tuple[float, float]]]


def _search_calls(api: ApiProcess, work: Mapping[str, ClassWork], until: Callable[[], bool]
                  ) -> Calls:
    """One client searching the mid-size and small mailboxes (full text and semantic, in
    turn) until ``until()``: each answered call's start and milliseconds, per class."""
    callers = [(cls, _caller(api, work[cls], mode), work[cls].inputs[mode])
               for cls in ("mid", "small") for mode in ("fulltext", "semantic")]
    found: Calls = {"mid": [], "small": []}
    n, start = 0, time.perf_counter()
    while not until():
        cls, call, inputs = callers[n % len(callers)]
        began = time.perf_counter()
        if call(inputs[(n // len(callers)) % len(inputs)]):
            found[cls].append((began - start, (time.perf_counter() - began) * 1000))
        n += 1
    return found


def _call_stats(calls: Calls, upto: float = math.inf) -> dict[str, dict[str, Any]]:
    """p50/p99 (ms), count and the ten slowest ``[seconds into the window, ms]`` (in time
    order: where a tail sits against the purge's steps) of the calls begun before ``upto``."""
    out: dict[str, dict[str, Any]] = {}
    for cls, found in calls.items():
        kept = [c for c in found if c[0] < upto]
        ms = [c[1] for c in kept]
        worst = sorted(kept, key=lambda c: c[1], reverse=True)[:10]
        out[cls] = {"p50_ms": percentile(ms, 50), "p99_ms": percentile(ms, 99),
                    "calls": len(ms),
                    "slowest": [[round(t, 2), round(v, 1)] for t, v in sorted(worst)]}
    return out


def _searching(api: ApiProcess, work: Mapping[str, ClassWork], until: Callable[[], bool]
               ) -> dict[str, dict[str, Any]]:
    """:func:`_search_calls`' figures per class."""
    return _call_stats(_search_calls(api, work, until))


def _purge_window(opts: TenantOptions) -> float:
    """Seconds of the quiet and the after windows: a p99 of at least a minute of calls
    (about 2,500 per class), so that the ratio is not one outlier's."""
    return max(opts.search_seconds, PURGE_WINDOW_S)


def measure_purge(settings: Settings, work: Mapping[str, ClassWork], opts: TenantOptions,
                  run_dir: Path, log: Log) -> dict[str, Any]:
    """``sidecar purge`` of the whale while one client searches the others: their p99 before
    (:func:`_purge_window`), during and after (the same), and how long the purge took
    at the settings' pace (``SIDECAR_PURGE_RATE``)."""
    api = start_api(settings, [w.mailbox for w in work.values()], run_dir / "api-purge.log")
    try:
        for cls in ("mid", "small"):  # warm-up
            for mode in ("fulltext", "semantic"):
                _caller(api, work[cls], mode)(work[cls].inputs[mode][0])
        stop_at = time.monotonic() + _purge_window(opts)
        quiet = _searching(api, work, lambda: time.monotonic() > stop_at)
        env = {**os.environ, **to_env(settings), "HF_HUB_OFFLINE": "1"}
        began = time.perf_counter()
        with (run_dir / "purge.log").open("ab") as sink, \
                (run_dir / "purge.json").open("wb") as out:
            purge = subprocess.Popen(
                [sys.executable, "-m", "indexer.cli.main", "purge", "--mailbox",
                 work["whale"].mailbox, "--json"], env=env, stdout=out, stderr=sink)
        calls = _search_calls(api, work, lambda: purge.poll() is not None)
        duration = time.perf_counter() - began
        log(f"tenants: purge of the whale took {duration:.1f} s (exit {purge.returncode})")
        # the engines' work outlasts the purge (Qdrant's vacuum of the emptied segments,
        # OpenSearch's merges of the deletes): the same window again, after
        stop_at = time.monotonic() + _purge_window(opts)
        after = _searching(api, work, lambda: time.monotonic() > stop_at)
        left = build_opensearch(settings).count(
            index=settings.opensearch_index, routing=work["whale"].mailbox,
            body={"query": {"term": {"mailbox_id": work["whale"].mailbox}}})["count"]
        report = json.loads((run_dir / "purge.json").read_text() or "{}")
        steps = report.get("seconds", {})
        # the purge's last steps (its look at the mail table, then Redis) end the window:
        # the calls begun before them saw the engines' steps alone. On moto that look (a GSI
        # Query, Limit 1) reads and sorts the whole table; on DynamoDB it reads one item.
        last = sum(float(steps.get(k, 0.0)) for k in ("check", "dead_letters", "task_results"))
        return {"duration_s": duration, "exit_code": purge.returncode, "quiet": quiet,
                "during": _call_stats(calls),
                "during_engines": _call_stats(calls, duration - last - 0.2),
                "after": after, "rate_per_s": settings.purge_rate,
                "whale_documents_left": int(left), "step_seconds": steps}
    finally:
        stop_api(api)


def _cpu(settings: Settings, api_pid: int, server_pid: int | None) -> dict[str, float]:
    found = {"api": _proc_cpu_s(api_pid), "opensearch": _node_cpu_s(settings)}
    if server_pid is not None:
        found["qdrant_server"] = _proc_cpu_s(server_pid)
    return found


# --- the run -----------------------------------------------------------------------------------


_SERVERS: dict[str, tuple[int, int, Path]] = {}


@contextmanager
def _server(run_dir: Path, name: str) -> Iterator[Any]:
    from sidecar_tools.stack.qdrant_server import server_binary, start_server

    binary = server_binary()
    if binary is None:
        raise RuntimeError("bench-tenants --backend server: no Qdrant server binary "
                           "(SIDECAR_QDRANT_BIN or ../shared/tools/qdrant)")
    server = start_server(binary, (run_dir / name).resolve())
    # pid, RSS of the empty server (the baseline its collection's figures are measured
    # against) and its storage directory
    _SERVERS[server.url] = (server.process.pid, _proc_rss(server.process.pid),
                            (run_dir / name).resolve() / "storage")
    try:
        yield server
    finally:
        server.stop()


def _server_settings(settings: Settings, server: Any) -> Settings:
    return settings.model_copy(update={"qdrant_url": server.url,
                                       "qdrant_grpc_port": server.grpc_port})


def run(opts: TenantOptions, base: Settings, log: Log) -> dict[str, Any]:
    """Build, measure, clean up; the dict ``--json`` writes (fields: capacity.md)."""
    started = time.perf_counter()
    run_id = uuid.uuid4().hex[:8]
    run_dir = opts.workdir / "runs" / f"tenants-{run_id}"
    run_dir.mkdir(parents=True, exist_ok=True)
    name = f"bench-{run_id}-tenants"
    settings = base.model_copy(update={
        "table": name, "state_table": f"{name}-state", "opensearch_index": name,
        "qdrant_collection": name, "qdrant_path": run_dir / "qdrant", "queue_prefix": name,
        "opensearch_shards": opts.shards, "qdrant_url": None,
    })
    corpus = opts.corpus if opts.corpus is not None else corpus_mod.default_corpus()
    out: dict[str, Any] = {
        "command": {"messages": opts.messages, "mailboxes": opts.mailboxes,
                    "whale_share": opts.whale_share, "mid_mailboxes": opts.mid_mailboxes,
                    "mid_share": opts.mid_share, "distinct": opts.distinct,
                    "backend": opts.backend, "shards": opts.shards, "clients": opts.clients,
                    "search_seconds": opts.search_seconds, "queries": opts.queries,
                    "corpus": str(corpus) if corpus else "generated"},
    }
    servers: list[Any] = []
    try:
        pool = _pool(corpus, opts.distinct)
        vectors, out["encode_s"] = _base_vectors(settings, pool, opts.workdir / "tenants", log)
        out["distinct_texts"] = len(pool)
        if opts.backend == "server":
            stack = _server(run_dir, "qdrant-server")
            server = stack.__enter__()
            servers.append(stack)
            settings = _server_settings(settings, server)
        log(f"tenants: building {opts.messages} messages over {opts.mailboxes} mailboxes "
            f"({opts.backend}, {opts.shards} shards)")
        built = build(settings, opts, pool, vectors, run_id, log)
        out["mailboxes_searched"] = built.mailboxes
        out["mailbox_sizes"] = built.sizes
        out["documents"], out["points"] = built.documents, built.points
        out["rows_s"] = write_rows(settings, built.rows)
        out["hot_rows_messages"] = len(built.rows)
        index = factories.vector_index(settings)
        store, collection = index.store, index.store.aliases()[index.alias]
        out["vectors_settle_s"] = _settle(store, collection)
        out["build"] = {"fulltext_s": built.fulltext_s, "vectors_upsert_s": built.vectors_s,
                        "vectors_settle_s": out["vectors_settle_s"],
                        "total_s": built.fulltext_s + built.vectors_s + out["vectors_settle_s"]}
        embedder = build_embedder(settings)
        work = workloads(built, opts.queries)
        qvec = {cls: embedder.embed_query(queries.free_text_queries(
            built.messages[cls], w.mailbox, opts.recall_queries)) for cls, w in work.items()}
        out["recall"] = {"int8": {cls: recall(store, collection, w.mailbox, qvec[cls])
                                  for cls, w in work.items()}}
        out.update(_storage(settings, opts, run_dir, index, collection, work, qvec, servers, log))
        factories.vector_index.cache_clear()
        out["shards"] = probe_shards(settings, work, run_dir, log)
        server_pid = _server_pid(settings) if opts.backend == "server" else None
        if opts.search_seconds > 0:  # 0: structure only (the CI test)
            out["latency"] = measure_latency(settings, work, opts, run_dir, server_pid, log)
        if opts.purge and opts.backend == "server":
            out["purge"] = measure_purge(settings, work, opts, run_dir, log)
    finally:
        factories.vector_index.cache_clear()
        for stack in reversed(servers):
            stack.__exit__(None, None, None)
        build_opensearch(base).indices.delete(index=f"{name}*", ignore_unavailable=True,
                                              expand_wildcards="all")
        for table in (name, f"{name}-state"):
            with contextlib.suppress(Exception):  # a table never made: nothing to delete
                aws.client(base, "dynamodb").delete_table(TableName=table)
        shutil.rmtree(run_dir, ignore_errors=True)
    out["wall_s"] = time.perf_counter() - started
    return out


def _server_pid(settings: Settings) -> int | None:
    """The pid of the Qdrant server this run started at the settings' URL."""
    found = _SERVERS.get(settings.qdrant_url or "")
    return found[0] if found else None


def _storage(settings: Settings, opts: TenantOptions, run_dir: Path, index: VectorIndex,
             collection: str, work: Mapping[str, ClassWork],
             qvec: Mapping[str, Sequence[Sequence[float]]], servers: list[Any],
             log: Log) -> dict[str, Any]:
    """OpenSearch bytes per message; Qdrant RSS and disk per point for the int8 layout and,
    with ``compare_float32``, the float32 one built beside it from the same points."""
    client = build_opensearch(settings)
    stats = client.indices.stats(index=settings.opensearch_index, metric="store,docs")
    prim = stats["_all"]["primaries"]
    docs = int(prim["docs"]["count"])
    out: dict[str, Any] = {"opensearch": {
        "documents": docs, "store_bytes": int(prim["store"]["size_in_bytes"]),
        "store_bytes_per_message": int(prim["store"]["size_in_bytes"]) / max(docs, 1),
        "shards": opts.shards,
        # documents per primary: how unevenly the mailboxes (the whale) fill the shards
        "primary_documents": sorted(
            (int(row["docs"] or 0) for row in client.cat.shards(
                index=settings.opensearch_index, format="json") if row["prirep"] == "p"),
            reverse=True)}}
    boxes = [w.mailbox for w in work.values()]
    vectors = [v for vs in qvec.values() for v in vs[:10]]
    points = index.store.count(collection, None)
    layouts: dict[str, Any] = {}
    if opts.backend == "edge":
        store = index.store
        root = settings.qdrant_path
        if opts.compare_float32:
            log("tenants: the same points into a float32 Edge store beside it")
            old = build_store(settings.model_copy(update={"qdrant_path": run_dir / "f32"}))
            old.compact = False  # type: ignore[attr-defined]
            copied, spent = copy_float32(store, collection, old, collection, index.dim)
            out["recall_float32"] = {cls: recall(old, collection, w.mailbox, qvec[cls])
                                     for cls, w in work.items()}
            old.close()
            layouts["float32"] = {"points": copied, "build_s": spent,
                                  **_edge_figures(run_dir / "f32", collection, boxes, vectors,
                                                  copied)}
        index.close()
        factories.vector_index.cache_clear()
        layouts["int8"] = _edge_figures(root, collection, boxes, vectors, points)
        layouts["int8"]["points"] = points
    else:
        layouts["int8"] = _server_figures(settings, collection, boxes, vectors, points)
        layouts["int8"]["points"] = points
        if opts.compare_float32:
            log("tenants: the same points into a float32 collection on a second server")
            stack = _server(run_dir, "qdrant-f32")
            server = stack.__enter__()
            servers.append(stack)
            other = _server_settings(settings, server)
            old = build_store(other)
            old.compact = False  # type: ignore[attr-defined]
            copied, spent = copy_float32(index.store, collection, old, collection, index.dim)
            out["recall_float32"] = {cls: recall(old, collection, w.mailbox, qvec[cls])
                                     for cls, w in work.items()}
            layouts["float32"] = {"points": copied, "build_s": spent,
                                  **_server_figures(other, collection, boxes, vectors, copied)}
            old.close()
        index.close()
    out["qdrant"] = layouts
    return out


def _edge_figures(root: Path, collection: str, boxes: Sequence[str],
                  vectors: Sequence[Sequence[float]], points: int) -> dict[str, Any]:
    rss = edge_rss(root, collection, boxes, vectors)
    disk = _du(root / "collections" / collection)
    gained = rss["rss_after"] - rss["rss_before"]
    return {**rss, "rss_bytes": gained, "rss_bytes_per_point": gained / max(points, 1),
            "rss_anon_bytes_per_point": rss["rss_anon"] / max(points, 1),
            "disk_bytes": disk, "disk_bytes_per_point": disk / max(points, 1)}


def _server_figures(settings: Settings, collection: str, boxes: Sequence[str],
                    vectors: Sequence[Sequence[float]], points: int) -> dict[str, Any]:
    """RSS the server process gained over its empty start after building the collection and
    searching every class, and the collection's directory on disk. The server keeps what
    its build left resident (the Edge figures come from a fresh process)."""
    pid, empty, storage = _SERVERS[settings.qdrant_url or ""]
    store = build_store(settings)
    try:
        for vector in vectors:
            for box in boxes:
                store.search(collection, vector, match("mailbox_id", box), DEPTH)
        rss = _proc_rss(pid)
    finally:
        store.close()
    folder = storage / "collections" / collection
    disk = _du(folder) if folder.is_dir() else 0
    return {"rss_before": empty, "rss_after": rss, "rss_bytes": rss - empty,
            "rss_bytes_per_point": (rss - empty) / max(points, 1),
            "disk_bytes": disk, "disk_bytes_per_point": disk / max(points, 1)}


def summary(result: Mapping[str, Any]) -> list[str]:
    """The figures a person reads first, one line each."""
    lines = [f"built {result.get('documents')} documents / {result.get('points')} points "
             f"over {result['command']['mailboxes']} mailboxes in "
             f"{result.get('build', {}).get('total_s', float('nan')):.1f} s"]
    for key, row in sorted(result.get("latency", {}).items()):
        if isinstance(row, dict) and "one_client" in row:
            one, many = row["one_client"], row["many_clients"]
            cpu = sum(row["cpu_s_per_request"].values())
            shard = result.get("shards", {}).get(key, {}).get("one_shard_fraction")
            lines.append(f"{key:18} p50 {one['p50_ms']:7.1f} p95 {one['p95_ms']:7.1f} p99 "
                         f"{one['p99_ms']:7.1f} ms | {many['rps']:6.1f} req/s, "
                         f"{cpu * 1000:6.1f} ms CPU/req | one shard: {shard}")
    for layout, found in result.get("recall", {}).items():
        lines.append(f"recall@10 {layout}: " + ", ".join(
            f"{c} {v['recall_at_10']:.3f}" for c, v in found.items()))
    if "recall_float32" in result:
        lines.append("recall@10 float32: " + ", ".join(
            f"{c} {v['recall_at_10']:.3f}" for c, v in result["recall_float32"].items()))
    for layout, found in result.get("qdrant", {}).items():
        lines.append(f"qdrant {layout}: RSS {found['rss_bytes_per_point']:.0f} B/point, "
                     f"disk {found['disk_bytes_per_point']:.0f} B/point")
    if "opensearch" in result:
        lines.append(f"opensearch: {result['opensearch']['store_bytes_per_message']:.0f} "
                     "B/message (primaries)")
    if "purge" in result:
        lines += _purge_lines(result["purge"])
    return lines


def _purge_lines(purge: Mapping[str, Any]) -> list[str]:
    """The purge's duration and the others' p99 before, during and after, with the ratio."""
    lines = [f"purge of the whale: {purge['duration_s']:.1f} s at "
             f"{purge.get('rate_per_s', 0):g}/s, exit {purge['exit_code']}"]
    nan = float("nan")
    for cls, quiet in purge.get("quiet", {}).items():
        during = purge["during"].get(cls, {}).get("p99_ms", nan)
        engines = purge.get("during_engines", {}).get(cls, {}).get("p99_ms", nan)
        after = purge.get("after", {}).get(cls, {}).get("p99_ms", nan)
        lines.append(f"  {cls}: p99 quiet {quiet['p99_ms']:.1f}, during {during:.1f} "
                     f"({during / quiet['p99_ms']:.2f}x; engines' steps {engines:.1f}, "
                     f"{engines / quiet['p99_ms']:.2f}x), after {after:.1f} ms")
    return lines



def markdown(result: Mapping[str, Any]) -> str:
    """The run's tables as the results page shows them (latency per mode x class, storage)."""
    rows = ["| mode | class (messages) | p50 | p95 | p99 (1 client) | req/s (8 clients) | "
            "CPU ms/request | one shard |", "|---|---|---:|---:|---:|---:|---:|---|"]
    sizes = result.get("mailbox_sizes", {})
    for mode in MODES:
        for cls in CLASSES:
            key = f"{mode}/{cls}"
            lat = result.get("latency", {}).get(key)
            shard = result.get("shards", {}).get(key, {})
            fraction = shard.get("one_shard_fraction")
            where = ("n/a (Qdrant only)" if fraction is None
                     else f"{fraction:.2f} of {shard.get('opensearch_searches')}")
            if lat is None:
                rows.append(f"| {mode} | {cls} ({sizes.get(cls)}) | – | – | – | – | – | {where} |")
                continue
            one, many = lat["one_client"], lat["many_clients"]
            cpu = sum(lat["cpu_s_per_request"].values()) * 1000
            rows.append(f"| {mode} | {cls} ({sizes.get(cls):,}) | {one['p50_ms']:.1f} | "
                        f"{one['p95_ms']:.1f} | {one['p99_ms']:.1f} | {many['rps']:.1f} | "
                        f"{cpu:.0f} | {where} |")
    rows += ["", "| layout | points | RSS B/point | disk B/point | recall@10 whale / mid / small "
             "| build s |", "|---|---:|---:|---:|---|---:|"]
    recalls = {"int8": result.get("recall", {}).get("int8", {}),
               "float32": result.get("recall_float32", {})}
    for layout, found in result.get("qdrant", {}).items():
        rec = " / ".join(f"{recalls[layout][c]['recall_at_10']:.3f}" for c in CLASSES
                         if c in recalls.get(layout, {}))
        build_s = found.get("build_s", result.get("build", {}).get("vectors_upsert_s", 0)
                            + result.get("build", {}).get("vectors_settle_s", 0))
        rows.append(f"| {layout} | {found.get('points', result.get('points', 0)):,} | "
                    f"{found['rss_bytes_per_point']:,.0f} | {found['disk_bytes_per_point']:,.0f} "
                    f"| {rec} | {build_s:.1f} |")
    return "\n".join(rows)
