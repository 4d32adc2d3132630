"""What contacts cost at scale (issue 43), for :mod:`sidecar_tools.quality.suggestions`.

- **Rebuild**: the summary of the loaded mailbox recomputed from the message index, as
  ``sidecar contacts-rebuild`` does after an upgrade (the bench loads documents in bulk, past
  the workers, so this is also how its summary is made).
- **Latency**: the endpoint's work in-process (``contacts.contacts``) for seeded prefixes of
  1–4 characters of real addresses, domains and name words; ``--baseline FILE`` times an
  older ``search_api/contacts.py`` (``git show <commit>:search_api/contacts.py > FILE``) on
  the same index in the same run, prefix by prefix in turn, so both see the same load.
- **Write cost**: the full-text sink's ``apply`` of 100-message batches, the plain message
  index against the one that keeps the summary: deferred (a worker's), inline and waiting,
  inline with a forced refresh (the table's reads are the same in all and left out), batch
  by batch in turn, into a fresh mailbox; then the deferred recounts' own time.
"""

from __future__ import annotations

import importlib.util
import random
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any

from indexer.adapters import factories
from indexer.adapters.opensearch.contacts import ContactsIndex
from indexer.core.contacts import fold
from indexer.core.documents import MessageState
from indexer.core.plan import MessageRef
from indexer.pipeline import contacts_sync
from indexer.pipeline.contacts_sync import fulltext_sink, keeper
from indexer.settings import Settings
from search_api import contacts as contact_list
from search_api.backends import Backends

WRITES = "eval-writes"  # the write-cost batches' mailbox (a fresh one per run: new messages)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(times: list[float]) -> dict[str, Any]:
    return {"n": len(times), "p50 ms": round(statistics.median(times), 1),
            "p99 ms": round(pct(times, 0.99), 1), "max ms": round(max(times), 1)}


def prefixes(found: list[MessageState], n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    people = sorted({(p.email.lower(), p.name or "") for s in found for p in s.participants
                     if p.role != "bcc"})
    out: list[str] = []
    while len(out) < n:
        email, name = rng.choice(people)
        length = rng.randint(1, 4)
        kind = rng.choice(["address", "domain", "name"])
        if kind == "name" and name.split():
            out.append(rng.choice(name.split())[:length])
        elif kind == "domain" and "@" in email:
            out.append(email.split("@", 1)[1][:length])
        else:
            out.append(email[:length])
    return out


def rebuild(settings: Settings, mailbox: str) -> dict[str, Any]:
    started = time.monotonic()
    written = keeper(settings).rebuild(mailbox)
    keeper(settings).index.refresh()
    return {"contacts written": written, "seconds": round(time.monotonic() - started, 1)}


def load_older(path: Path) -> ModuleType:
    """An older module of the API (``git show <commit>:<path>``), loaded from a file beside
    the current code."""
    spec = importlib.util.spec_from_file_location(f"older_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"not a Python module: {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def latency(b: Backends, mailbox: str, asked: list[str], old: ModuleType | None,
            clients: int) -> dict[str, Any]:
    """Each variant's times over the same prefixes (``clients`` asking at once)."""
    variants: dict[str, Callable[[str], Any]] = {
        "summary (shipped)": lambda p: contact_list.contacts(b, mailbox, p, 10)}
    if old is not None:
        variants["aggregations (baseline)"] = lambda p: old.contacts(b, mailbox, p, 10)

        def mapped(p: str) -> Any:
            setattr(old, "EXECUTION_HINT", "map")  # noqa: B010 (a module loaded at run time)
            try:
                return old.contacts(b, mailbox, p, 10)
            finally:
                setattr(old, "EXECUTION_HINT", "global_ordinals")  # noqa: B010

        if clients == 1:  # the hint is a module global: one client at a time only
            variants["aggregations, execution_hint map"] = mapped
    times: dict[str, list[float]] = {name: [] for name in variants}

    def one(p: str) -> None:
        for name, ask in variants.items():
            start = time.perf_counter()
            ask(p)
            times[name].append((time.perf_counter() - start) * 1000)

    for p in asked[:20]:  # warm
        for ask in variants.values():
            ask(p)
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, asked))
    out = {"clients": clients, **{name: summary(t) for name, t in times.items()}}
    if clients == 1:  # the engine's own time for the shipped search (``took``)
        index = ContactsIndex(b.opensearch)
        took = [float(index.search(mailbox, contact_list.contacts_body(
            mailbox, fold(p), 10), b.settings.search_timeout_ms)["took"]) for p in asked]
        out["summary: engine took"] = summary(took)
    return out


def write_cost(settings: Settings, docs: list[dict[str, Any]], batches: int) -> dict[str, Any]:
    """Sink ``apply`` of 100-message batches, in turn: the plain message index; keeping the
    summary as a worker does (its recount published as a ``sidecar.contacts`` task, here on
    a probe queue of its own that no worker reads, emptied after); keeping it inline, waiting
    for the batch to be searchable (the Lambda handler; every path before the task); and
    inline with the read alias refreshed at once instead. The deferred recounts are then run
    as the task would, a second after the batches, each timed."""
    from indexer.pipeline.contacts_task import defer_to

    probe = settings.model_copy(update={"fulltext_queue": f"{WRITES}-probe-{uuid.uuid4().hex}"})
    publish = defer_to(probe)
    deferred: list[contacts_sync.Recount] = []

    def defer(rc: contacts_sync.Recount) -> None:
        publish(rc)
        deferred.append(rc)

    plain = factories.fulltext_index(settings)
    sinks = {"plain": plain,
             "keeping contacts, recount deferred to a task": fulltext_sink(settings, defer),
             "keeping contacts, waiting for the refresh": fulltext_sink(settings),
             "keeping contacts, refreshing": fulltext_sink(settings)}
    times: dict[str, list[float]] = {mode: [] for mode in sinks}
    mailbox = f"{WRITES}-{uuid.uuid4().hex[:8]}"
    shipped_wait = contacts_sync.VISIBLE_WAIT_S
    try:
        for i in range(batches * len(sinks)):
            mode = list(sinks)[i % len(sinks)]
            chunk = docs[i * 100:(i + 1) * 100]
            batch = {MessageRef(mailbox, d["message_key"]): {**d, "mailbox_id": mailbox}
                     for d in chunk}
            contacts_sync.VISIBLE_WAIT_S = 0.0 if mode.endswith("refreshing") else shipped_wait
            start = time.perf_counter()
            try:
                refused = sinks[mode].apply(batch)
            finally:
                contacts_sync.VISIBLE_WAIT_S = shipped_wait
            if refused:
                raise SystemExit("the engine refused a document of the write-cost batches")
            times[mode].append((time.perf_counter() - start) * 1000)
    finally:
        factories.redis_client(settings).delete(probe.fulltext_queue)
    time.sleep(1.0)  # the task's countdown
    recounts: list[float] = []
    for rc in deferred:
        start = time.perf_counter()
        contacts_sync.recount(keeper(settings), [rc])
        recounts.append((time.perf_counter() - start) * 1000)
    return {"batch": 100, **{mode: summary(t) for mode, t in times.items()},
            "the deferred recount task's work (after the batches)": summary(recounts)}
