"""What closing issue 38's channels costs: index size, bulk time and query latency, measured.

``python -m sidecar_tools.bench.tenancy_cost --corpus FILE --messages N`` indexes the same
messages into a mapping-v5 and a mapping-v6 index (v6 adds the prefix fields of phrase
prefixes), force-merges both to one segment, and reports per index its ``store.size``, the
bulk's wall time, and the engine time (``took``) of phrase-prefix searches as the API sends
them now and as it sent them before; then "similar" by terms as now (term vectors, counts in
the mailbox, term clauses) against ``more_like_this`` as before, on the same liked messages.
Everything is measured in one run on one node, so compare the ratios.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

from indexer.adapters import factories
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.core.documents import MessageState, Participant, point_id, search_document
from indexer.core.plan import MessageRef
from indexer.settings import Settings
from search_api.query import build_search_body, parse
from search_api.query import more_like_this as mlt
from sidecar_tools.bench.timing import percentile
from sidecar_tools.quality.corpus import read_corpus
from sidecar_tools.writer.mapping import to_items

BOX = "tenancy-cost@example.org"
PREFIX_QUERIES = ['"the ker"*', '"mips ke"*', '"device tr"*', '"patch v"*', '"signed-off b"*',
                  '"for the"*', '"in the dr"*', '"this pa"*']
ONE_WORD = ['"kern"*', '"regi"*', '"dri"*', '"th"*']


def _docs(emails: list[dict[str, Any]]) -> dict[MessageRef, dict[str, Any] | None]:
    docs: dict[MessageRef, dict[str, Any] | None] = {}
    for email in emails:
        items = to_items(email, BOX)
        people = [Participant(p["role"], p["email"], p.get("name")) for p in items.participants]
        ref = MessageRef(BOX, items.message_key)
        docs[ref] = search_document(MessageState(ref, items.message, items.body, people))
    return docs


def load_index(settings: Settings, version: int, docs: dict[MessageRef, Any]) -> tuple[
        OpenSearchIndex, float, int]:
    """A fresh ``<namespace>-<version>`` index of that mapping version holding ``docs`` (500
    per bulk request), then force-merged to one segment: it, the bulk's seconds, its size."""
    index = OpenSearchIndex(factories.fulltext_index(settings).client,
                            f"{settings.opensearch_index}-{version}")
    name = index.ensure(version)
    refs = list(docs)
    started = time.perf_counter()
    for start in range(0, len(refs), 500):
        assert not index.apply({r: docs[r] for r in refs[start:start + 500]})
    index.refresh()
    bulk_s = time.perf_counter() - started
    index.client.indices.forcemerge(index=name, max_num_segments=1)
    index.refresh()
    stats = index.client.indices.stats(index=name, metric="store")
    return index, bulk_s, int(stats["indices"][name]["primaries"]["store"]["size_in_bytes"])


def _took(index: OpenSearchIndex, body: dict[str, Any], repeat: int) -> list[int]:
    return [int(index.search_response(BOX, body)["took"]) for _ in range(repeat)]


def _old_phrase_prefix(text: str) -> dict[str, Any]:
    query = {"multi_match": {"query": text.strip('"*'), "type": "phrase_prefix",
                             "fields": ["subject.exact^3", "clean.exact"]}}
    return {"query": {"bool": {"filter": [{"term": {"mailbox_id": BOX}}], "must": [query]}},
            "size": 20}


def _summary(values: list[float]) -> dict[str, float]:
    return {"p50": statistics.median(values), "p99": percentile(values, 99),
            "mean": statistics.fmean(values)}


def _similar_now(index: OpenSearchIndex, doc_id: str) -> float:
    started = time.perf_counter()
    tf = mlt.liked_terms(index.term_vectors(BOX, doc_id, mlt.term_vectors_request(
        doc_id, mlt.MLT_FIELDS, mlt.LIKED_BODY_ANALYZER)))
    chosen = mlt.candidates(tf)
    counts = index.search_response(BOX, mlt.counts_body(BOX, chosen))
    terms = mlt.best_terms(tf, chosen, counts)
    index.search_response(BOX, mlt.terms_body(mailbox_id=BOX, doc_id=doc_id, thread_key=None,
                                              terms=terms, size=20))
    return (time.perf_counter() - started) * 1000


def _similar_before(index: OpenSearchIndex, doc_id: str) -> float:
    like = {"_index": index.alias, "_id": doc_id, "routing": BOX,
            "per_field_analyzer": {"clean": mlt.LIKED_BODY_ANALYZER}}
    body = {"query": {"bool": {"filter": [{"term": {"mailbox_id": BOX}}], "must": [
        {"more_like_this": {"fields": list(mlt.MLT_FIELDS), "like": [like], "min_term_freq": 1,
                            "min_doc_freq": 1, "max_query_terms": 25}}]}}, "size": 20}
    started = time.perf_counter()
    index.search_response(BOX, body)
    return (time.perf_counter() - started) * 1000


def run(settings: Settings, corpus: Path, messages: int, repeat: int) -> dict[str, Any]:
    emails = read_corpus(corpus)[:messages]
    docs = _docs(emails)
    result: dict[str, Any] = {"messages": len(docs), "corpus": str(corpus), "indexes": {}}
    made: list[OpenSearchIndex] = []
    try:
        for version in (5, 6):
            index, bulk_s, size = load_index(settings, version, docs)
            made.append(index)
            now = [t for q in PREFIX_QUERIES + ONE_WORD for t in _took(
                index, build_search_body(parse(q), BOX, size=20, sort_by_date=False,
                                         highlight=False), repeat)]
            before = [t for q in PREFIX_QUERIES + ONE_WORD
                      for t in _took(index, _old_phrase_prefix(q), repeat)]
            result["indexes"][f"v{version}"] = {
                "store_bytes": size, "bytes_per_message": size / len(docs), "bulk_s": bulk_s,
                "phrase_prefix_took_ms_now": _summary([float(t) for t in now]),
                "phrase_prefix_took_ms_before": _summary([float(t) for t in before])}
        index = made[-1]
        liked = [point_id(ref) for ref in list(docs)[: 40 * 4: 4]]
        result["similar_ms"] = {
            "now": _summary([_similar_now(index, d) for d in liked for _ in range(repeat)]),
            "before_more_like_this": _summary(
                [_similar_before(index, d) for d in liked for _ in range(repeat)])}
    finally:
        for index in made:
            index.client.indices.delete(index=f"{index.alias}*", ignore_unavailable=True)
    v5, v6 = result["indexes"]["v5"], result["indexes"]["v6"]
    result["v6_over_v5"] = {"store": v6["store_bytes"] / v5["store_bytes"],
                            "bulk": v6["bulk_s"] / v5["bulk_s"]}
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, required=True)
    parser.add_argument("--messages", type=int, default=4000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    settings = Settings().model_copy(
        update={"opensearch_index": f"tenancy-cost-{uuid.uuid4().hex[:6]}"})
    result = run(settings, args.corpus, args.messages, args.repeat)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
