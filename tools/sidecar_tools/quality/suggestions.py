"""Measure "did you mean" and contact autocomplete on real mail (issue 43).

``python -m sidecar_tools.quality.suggestions [--corpus F] [--copies N] [--typos N]``

What it does, against the running local stack (OpenSearch, moto), in a scratch namespace it
deletes at the end:

1. Indexes a corpus (default ``tests/data/corpora/linux-mips-4k.jsonl.gz``, 4,000 messages)
   into mailbox ``eval`` with the documents the indexer makes (``search_document``), and
   writes their participant items to the sidecar table (the contacts' names).
2. **Typo set**: words of the mailbox (letters only, >= 5 letters, in >= 3 messages), each
   given one seeded edit — a deleted, doubled, substituted or inserted letter, or two adjacent
   letters swapped — kept when the typo is not itself a word of the mailbox. Each typo is
   searched alone and after a correct word of the same message; the first (only) suggestion is
   right when it restores the word. Also: how often a correctly spelt query gets one.
3. **Search latency**: each typo and correct query as the full-text page (20 hits, snippets)
   alone, and with did-you-mean beside it as ``service.search`` runs it: p50/p99 of both.
4. **Contacts**: with ``--copies N`` the corpus's documents are copied N more times into the
   same mailbox, older (other keys, ``ts`` earlier by a year per copy), without their bodies
   (contacts read only address fields) — 4,000 x (N + 1) messages; the contact summary is
   rebuilt from them, then prefixes of real addresses, domains and names (1–4 characters)
   are timed, and optionally an older implementation beside it and the write cost
   (:mod:`sidecar_tools.quality.contacts_cost`).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import hashlib
import json
import random
import re
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opensearchpy import helpers

from indexer.adapters.aws import clients as aws
from indexer.adapters.dynamodb.tables import init_tables
from indexer.adapters.opensearch.index import OpenSearchIndex, build_client
from indexer.core.documents import MessageState, Participant, point_id, search_document
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api import candidates as legs
from search_api import suggest
from search_api.backends import Backends
from search_api.query import Node, parse
from sidecar_tools.quality import contacts_cost
from sidecar_tools.writer.mapping import to_items

DEFAULT_CORPUS = Path(__file__).resolve().parents[3] / "tests/data/corpora/linux-mips-4k.jsonl.gz"
MAILBOX = "eval"
_WORD = re.compile(r"[^\W\d_]+")
YEAR = 365 * 86400


def emails(path: Path) -> list[dict[str, Any]]:
    with gzip.open(path, "rt", encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def states(mail: list[dict[str, Any]]) -> Iterator[MessageState]:
    for email in mail:
        items = to_items(email, MAILBOX)
        people = tuple(Participant(p["role"], p["email"], p.get("name"))
                       for p in items.participants)
        yield MessageState(MessageRef(MAILBOX, items.message_key), items.message, items.body,
                           people)


def _actions(index: str, docs: list[tuple[str, dict[str, Any]]]) -> Iterator[dict[str, Any]]:
    for key, doc in docs:
        yield {"_index": index, "_id": point_id(MessageRef(MAILBOX, key)), "_routing": MAILBOX,
               "_source": doc}


def load(settings: Settings, found: list[MessageState], copies: int) -> list[dict[str, Any]]:
    """Index the documents (and ``copies`` body-less older copies); participant items of the
    originals into the sidecar table. Returns the originals' documents."""
    client = build_client(settings)
    index = OpenSearchIndex(client, settings.opensearch_index)
    target = index.ensure()
    docs = [d for d in (search_document(s) for s in found) if d is not None]
    helpers.bulk(client, _actions(target, [(d["message_key"], d) for d in docs]),
                 chunk_size=500, request_timeout=120)
    for n in range(1, copies + 1):
        batch = []
        for d in docs:
            key = hashlib.sha256(f"{d['message_key']}#{n}".encode()).hexdigest()
            batch.append((key, {**d, "message_key": key, "clean": None,
                                "ts": int(d["ts"] or 0) - n * YEAR}))
        helpers.bulk(client, _actions(target, batch), chunk_size=2000, request_timeout=300)
        print(f"  copy {n}/{copies} indexed", file=sys.stderr)
    index.refresh()
    ddb = aws.client(settings, "dynamodb")
    init_tables(ddb, settings)
    table = settings.resolved_state_table
    puts = [_people_item(s) for s in found if s.participants]
    for i in range(0, len(puts), 25):
        request = {table: [{"PutRequest": {"Item": item}} for item in puts[i:i + 25]]}
        while request:
            request = ddb.batch_write_item(RequestItems=request).get("UnprocessedItems") or {}
    return docs


def _people_item(state: MessageState) -> dict[str, Any]:
    item: dict[str, Any] = {"PK": {"S": f"P#{MAILBOX}#{state.ref.message_key}"},
                            "SK": {"S": "PEOPLE"}}
    for p in state.participants:
        attr = "p_" + hashlib.sha256(f"{p.role}\x00{p.email}".encode()).hexdigest()[:24]
        item[attr] = {"M": {"role": {"S": p.role}, "email": {"S": p.email},
                            "name": {"S": p.name} if p.name else {"NULL": True}}}
    return item


def vocabulary(docs: list[dict[str, Any]]) -> Counter[str]:
    """Messages each lower-cased word occurs in (subject and body)."""
    df: Counter[str] = Counter()
    for d in docs:
        df.update({w.lower() for w in _WORD.findall(f"{d['subject'] or ''} {d['clean'] or ''}")})
    return df


def typo(word: str, rng: random.Random) -> str:
    i = rng.randrange(len(word))
    letters = "abcdefghijklmnopqrstuvwxyz"
    kind = rng.choice(["delete", "double", "substitute", "insert", "swap"])
    if kind == "delete":
        return word[:i] + word[i + 1:]
    if kind == "double":
        return word[:i] + word[i] + word[i:]
    if kind == "substitute":
        return word[:i] + rng.choice(letters.replace(word[i], "")) + word[i + 1:]
    if kind == "insert":
        return word[:i] + rng.choice(letters) + word[i:]
    i = min(i, len(word) - 2)
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


def typo_set(docs: list[dict[str, Any]], n: int, seed: int) -> list[tuple[str, str, str]]:
    """(word, typo, a correct word of a message holding ``word``) triples."""
    df = vocabulary(docs)
    rng = random.Random(seed)
    words = sorted(w for w, c in df.items() if c >= 3 and len(w) >= 5 and w.isascii())
    rng.shuffle(words)
    out: list[tuple[str, str, str]] = []
    for word in words:
        wrong = typo(word, rng)
        if wrong == word or wrong in df:
            continue
        holders = [d for d in docs if word in (d["clean"] or "").lower().split()]
        beside = ""
        if holders:
            others = [w.lower() for w in _WORD.findall(holders[0]["clean"] or "")
                      if len(w) >= 5 and w.lower() != word and df[w.lower()] >= 3]
            beside = others[0] if others else ""
        out.append((word, wrong, beside))
        if len(out) >= n:
            break
    return out


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return (time.perf_counter() - start) * 1000


Suggest = Callable[[Backends, str, str, Node], Any]


def evaluate_typos(b: Backends, triples: list[tuple[str, str, str]],
                   dym: Suggest = suggest.did_you_mean) -> dict[str, Any]:
    results: dict[str, Any] = {}
    shapes = (("alone", lambda w, t, o: t), ("beside a word", lambda w, t, o: f"{o} {t}"))
    for label, make in shapes:
        asked = suggested = right = 0
        wrong_examples: list[str] = []
        for word, wrong, other in triples:
            if label != "alone" and not other:
                continue
            q = make(word, wrong, other)
            asked += 1
            got = dym(b, MAILBOX, q, parse(q))
            if got is None:
                continue
            suggested += 1
            want = make(word, word, other)
            if got.q.lower() == want:
                right += 1
            elif len(wrong_examples) < 12:
                wrong_examples.append(f"{q} -> {got.q} (meant {want})")
        results[label] = {
            "typos": asked, "suggested": suggested, "right": right,
            "precision": round(right / suggested, 3) if suggested else None,
            "right_of_all": round(right / asked, 3) if asked else None,
            "wrong_examples": wrong_examples,
        }
    false = sum(dym(b, MAILBOX, w, parse(w)) is not None
                for w, _, _ in triples)
    results["correct words given a suggestion"] = f"{false}/{len(triples)}"
    return results


def search_latency(b: Backends, queries: list[str], rounds: int,
                   variants: dict[str, Suggest]) -> dict[str, Any]:
    """The full-text page alone, then with each variant of did-you-mean beside it (as
    ``service.search`` runs it), query by query in turn so that all see the same load."""
    pool = ThreadPoolExecutor(2)

    def page(q: str) -> None:
        body = legs.fulltext_body(MAILBOX, parse(q), size=20, by_date=False)
        legs.fulltext(b, MAILBOX, body)

    def with_suggestion(q: str, dym: Suggest) -> None:
        beside = pool.submit(dym, b, MAILBOX, q, parse(q))
        page(q)
        beside.result()

    for q in queries[:20]:  # warm
        for dym in variants.values():
            with_suggestion(q, dym)
    alone: list[float] = []
    both: dict[str, list[float]] = {name: [] for name in variants}
    for _ in range(rounds):
        for q in queries:
            alone.append(timed(lambda q=q: page(q)))  # type: ignore[misc]
            for name, dym in variants.items():
                both[name].append(timed(lambda q=q, dym=dym: with_suggestion(q, dym)))  # type: ignore[misc]
    out: dict[str, Any] = {
        "queries": len(alone),
        "search p50/p99 ms": [round(pct(alone, 0.5), 1), round(pct(alone, 0.99), 1)]}
    for name, times in both.items():
        out[name] = {"with did-you-mean p50/p99 ms": [round(pct(times, 0.5), 1),
                                                      round(pct(times, 0.99), 1)],
                     "added p99 ms": round(pct(times, 0.99) - pct(alone, 0.99), 1)}
    return out


def _contacts(settings: Settings, b: Backends, found: list[MessageState],
              docs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    out: dict[str, Any] = {"rebuild": contacts_cost.rebuild(settings, MAILBOX)}
    asked = contacts_cost.prefixes(found, args.prefixes, args.seed)
    old = contacts_cost.load_older(args.baseline) if args.baseline else None
    out["latency"] = [contacts_cost.latency(b, MAILBOX, asked, old, clients)
                      for clients in args.clients]
    if args.write_batches:
        out["sink apply"] = contacts_cost.write_cost(settings, docs, args.write_batches)
    return out


def _drop(settings: Settings) -> None:
    build_client(settings).indices.delete(index=f"{settings.opensearch_index}*", ignore=[404])
    with contextlib.suppress(Exception):  # not made when the load failed early
        aws.client(settings, "dynamodb").delete_table(TableName=settings.resolved_state_table)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS)
    parser.add_argument("--copies", type=int, default=0)
    parser.add_argument("--typos", type=int, default=300)
    parser.add_argument("--prefixes", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=43)
    parser.add_argument("--skip", choices=["typos", "contacts"], action="append", default=[])
    parser.add_argument("--keep", metavar="NAME", help="load into (or reuse) this namespace "
                        "and leave it in place (delete it with --drop NAME)")
    parser.add_argument("--drop", metavar="NAME", help="delete a kept namespace and exit")
    parser.add_argument("--baseline", type=Path, help="an older search_api/contacts.py to "
                        "time beside the shipped one")
    parser.add_argument("--dym-baseline", type=Path, help="an older search_api/suggest.py "
                        "to measure beside the shipped one")
    parser.add_argument("--clients", type=int, nargs="+", default=[1])
    parser.add_argument("--write-batches", type=int, default=0,
                        help="100-message sink batches of each kind to time (write cost)")
    args = parser.parse_args(argv)
    if args.drop:
        _drop(Settings(opensearch_index=args.drop, table=args.drop))
        return 0
    name = args.keep or f"suggest-eval-{uuid.uuid4().hex[:8]}"
    settings = Settings(opensearch_index=name, table=name)
    found = list(states(emails(args.corpus)))
    b = Backends(settings, serves_vectors=False)
    report: dict[str, Any] = {"corpus": args.corpus.name,
                              "messages": len(found) * (args.copies + 1)}
    try:
        started = time.monotonic()
        reuse = args.keep and build_client(settings).indices.exists_alias(name=name)
        docs = ([d for d in (search_document(s) for s in found) if d is not None] if reuse
                else load(settings, found, args.copies))
        report["load s"] = round(time.monotonic() - started, 1)
        # Every request measured is computed: the shard request cache (which would answer a
        # repeated size-0 request from memory) is off for this index.
        build_client(settings).indices.put_settings(
            index=f"{name}*", body={"index": {"requests.cache.enable": False}})
        if "typos" not in args.skip:
            triples = typo_set(docs, args.typos, args.seed)
            variants: dict[str, Suggest] = {"shipped": suggest.did_you_mean}
            if args.dym_baseline:
                variants["baseline"] = contacts_cost.load_older(args.dym_baseline).did_you_mean
            report["did you mean"] = {name: evaluate_typos(b, triples, dym)
                                      for name, dym in variants.items()}
            print(json.dumps(report["did you mean"]), file=sys.stderr)  # kept if latency fails
            queries = [t for _, t, _ in triples] + [w for w, _, _ in triples]
            report["search latency"] = search_latency(b, queries, args.rounds, variants)
        if "contacts" not in args.skip:
            report["contacts"] = _contacts(settings, b, found, docs, args)
    finally:
        if not args.keep:
            _drop(settings)
        b.close()
    print(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
