"""What mail in any language costs (issue 43, part 4): document build, bulk, index size, search.

``python -m sidecar_tools.bench.language_cost --corpus FILE [--copies N]`` builds each
message's search document as v7 does (its language detected, the subject and body again in
its language's fields; the detection also timed alone) and as v6 held it, bulk-loads the v6
documents into a v6 index and the v7 documents into a v7 index (500 per request, each
version in turn, ``--rounds`` times into fresh indices, each force-merged to one segment:
``tenancy_cost.load_index``) and reports per version: the documents' build time, the bulk's
wall time (the median round), ``store.size``, and the engine time (``took``) of free-word
searches as the API sends them now (every language's fields) on v7 and as before on v6.
``--copies`` repeats the corpus under new message keys (a small multilingual set made
larger). One run on one node: compare ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.core.documents import MessageState, Participant, search_document
from indexer.core.language import for_version, language_fields
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api.query import build_search_body, parse
from search_api.query.clauses import without_language_fields
from sidecar_tools.bench.tenancy_cost import load_index
from sidecar_tools.quality.corpus import read_corpus
from sidecar_tools.writer.mapping import to_items

BOX = "language-cost@example.org"
QUERIES = ["Rechnungen", "réunions", "fatture", "vergaderingen", "kernel", "patch review",
           "memory leak", "device tree", "budget", "meeting"]


def states(emails: list[dict[str, Any]], copies: int) -> list[MessageState]:
    found = []
    for copy in range(copies):
        for email in emails:
            items = to_items(email, BOX)
            people = [Participant(p["role"], p["email"], p.get("name"))
                      for p in items.participants]
            key = items.message_key if copy == 0 else f"{items.message_key}-{copy}"
            found.append(MessageState(MessageRef(BOX, key), items.message, items.body, people))
    return found


def build(found: list[MessageState]) -> tuple[dict[MessageRef, Any], float, float]:
    """The v7 documents, the seconds building them took, and the seconds of that spent
    detecting languages (the same detection timed alone: a v6 document is the rest)."""
    started = time.perf_counter()
    docs = {s.ref: search_document(s) for s in found}
    built = time.perf_counter() - started
    started = time.perf_counter()
    for s in found:
        language_fields((s.message or {}).get("subject"), (s.body or {}).get("clean"))
    return docs, built, time.perf_counter() - started


def took(index: OpenSearchIndex, version: int, repeat: int) -> dict[str, float]:
    times = []
    for q in QUERIES:
        body = build_search_body(parse(q), BOX, size=20, sort_by_date=False, highlight=False)
        if version < 7:
            body = without_language_fields(body)
        times += [float(index.search_response(BOX, body)["took"]) for _ in range(repeat)]
    return {"p50": statistics.median(times), "mean": round(statistics.fmean(times), 2),
            "max": max(times)}


def run(settings: Settings, corpus: Path, copies: int, rounds: int, repeat: int) -> dict[str, Any]:
    found = states(read_corpus(corpus), copies)
    docs7, build7, detect_s = build(found)
    docs6 = {r: for_version(d, 6) for r, d in docs7.items()}
    build6 = build7 - detect_s
    langs: dict[str, int] = {}
    for d in docs7.values():
        langs[d["lang"]] = langs.get(d["lang"], 0) + 1
    built = {"v7": round(build7, 3), "of which detection": round(detect_s, 3),
             "detection us per message": round(detect_s / len(found) * 1e6, 1)}
    result: dict[str, Any] = {"corpus": corpus.name, "messages": len(found), "languages": langs,
                              "build_s": built}
    bulk: dict[int, list[float]] = {6: [], 7: []}
    for r in range(rounds):
        for version, docs in ((6, docs6), (7, docs7)):
            index, seconds, size = load_index(settings, version, docs)
            bulk[version].append(seconds)
            if r == rounds - 1:
                result[f"v{version}"] = {"store_bytes": size,
                                         "bytes_per_message": round(size / len(found)),
                                         "search_took_ms": took(index, version, repeat)}
            index.client.indices.delete(index=f"{index.alias}*", ignore_unavailable=True)
            index.client.indices.delete_index_template(
                name=f"{index.alias}-messages-v{version}", ignore=[404])
    for version in (6, 7):
        median = statistics.median(bulk[version])
        result[f"v{version}"]["bulk_s_median"] = round(median, 3)
        result[f"v{version}"]["bulk_msgs_per_s"] = round(len(found) / median, 1)
    result["v7_over_v6"] = {
        "store": round(result["v7"]["store_bytes"] / result["v6"]["store_bytes"], 3),
        "bulk_s": round(result["v7"]["bulk_s_median"] / result["v6"]["bulk_s_median"], 3),
        "build_plus_bulk_s": round((build7 + result["v7"]["bulk_s_median"])
                                   / (build6 + result["v6"]["bulk_s_median"]), 3)}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--copies", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    settings = Settings(opensearch_index=f"language-cost-{uuid.uuid4().hex[:8]}")
    print(json.dumps(run(settings, args.corpus, args.copies, args.rounds, args.repeat),
                     indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
