"""Query files and their judgement.

A query file is JSON lines, one query each::

    {"query": "from:keithp subject:xlib", "expected": ["<id@host>", ...],
     "kind": "operator", "note": "why these are the answers"}

``kind`` is ``operator`` (default: a yes/no question; it passes only with precision and recall
1.0) or ``ranked`` (free text: ``expected`` are the relevant messages, judged by MRR and
nDCG@10 besides precision/recall). ``collapse: "thread"`` makes the answer a set of threads
(``expected`` then holds AECS-1 ``threadId`` values). ``mode`` is ``fulltext`` (default),
``semantic`` or ``hybrid``. Queries run through :mod:`search_api.service`, the API's own code.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from search_api import candidates, service
from search_api.backends import Backends
from search_api.query import parse
from search_api.service import MODES
from search_api.weighing import mailbox_weighted
from sidecar_tools.quality.metrics import ndcg, precision, recall, reciprocal_rank

KINDS = frozenset({"operator", "ranked"})
PAGE = 1000  # every hit of a query over an evaluation corpus fits in one engine page


@dataclass(frozen=True)
class QuerySpec:
    query: str
    expected: tuple[str, ...]
    kind: str = "operator"
    collapse: bool = False
    mode: str = "fulltext"
    note: str = ""
    half: str = ""  # semantic set: "tune" (may tune the fusion) or "check" (held out)


@dataclass(frozen=True)
class QueryResult:
    spec: QuerySpec
    found: tuple[str, ...]
    precision: float
    recall: float
    rr: float
    ndcg: float

    @property
    def passed(self) -> bool:
        """Operator queries must be exact; ranked ones are reported, not gated."""
        return self.spec.kind != "operator" or (self.precision == 1.0 and self.recall == 1.0)


def parse_spec(raw: dict[str, Any], where: str) -> QuerySpec:
    """One line of a query file, validated (``ValueError`` names the line)."""
    kind, mode = raw.get("kind", "operator"), raw.get("mode", "fulltext")
    if not isinstance(raw.get("query"), str) or not isinstance(raw.get("expected"), list):
        raise ValueError(f"{where}: needs a string 'query' and a list 'expected'")
    if kind not in KINDS or mode not in MODES or raw.get("collapse") not in (None, "thread"):
        raise ValueError(f"{where}: bad kind, mode or collapse")
    return QuerySpec(
        query=raw["query"],
        expected=tuple(str(x) for x in raw["expected"]),
        kind=kind,
        collapse=raw.get("collapse") == "thread",
        mode=mode,
        note=str(raw.get("note", "")),
        half=str(raw.get("half", "")),
    )


def load_queries(path: Path) -> list[QuerySpec]:
    specs = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if line.strip() and not line.lstrip().startswith("//"):
            specs.append(parse_spec(json.loads(line), f"{path}:{number}"))
    return specs


@dataclass
class Identities:
    """message_key -> (Message-ID, threadId) of an indexed mailbox, read from the index."""

    by_key: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def of_mailbox(cls, backends: Backends, mailbox: str) -> Identities:
        index = backends.opensearch
        body = {
            "query": {"term": {"mailbox_id": mailbox}},
            "size": 10_000,
            "_source": ["message_key", "message_id", "thread_id"],
        }
        hits = index.client.search(index=index.alias, body=body, routing=mailbox)["hits"]["hits"]
        return cls(
            {
                h["_source"]["message_key"]: (h["_source"]["message_id"], h["_source"]["thread_id"])
                for h in hits
            }
        )


def _ranking(backends: Backends, mailbox: str, spec: QuerySpec) -> list[candidates.Candidate]:
    node = parse(spec.query)
    if spec.mode == "fulltext":  # as the API weighs words (search_api.service; hybrid
        node = mailbox_weighted(backends, mailbox, node)  # weighs its own full-text leg)
    if spec.mode == "fulltext":
        body = candidates.fulltext_body(
            mailbox, node, size=PAGE, by_date=False, collapse=spec.collapse
        )
        return candidates.fulltext(backends, mailbox, body)
    ranked = (
        candidates.semantic(backends, mailbox, node, service.DEPTH)
        if spec.mode == "semantic"
        else service.hybrid(backends, mailbox, node)
    )
    return service.collapse_threads(ranked) if spec.collapse else ranked


def run_query(backends: Backends, mailbox: str, ids: Identities, spec: QuerySpec) -> QueryResult:
    """Run one query as the API would and score it against its expected answer."""
    unit = 1 if spec.collapse else 0
    found = tuple(ids.by_key[c.message_key][unit] for c in _ranking(backends, mailbox, spec))
    expected = set(spec.expected)
    return QueryResult(
        spec,
        found,
        precision(found, expected),
        recall(found, expected),
        reciprocal_rank(found, expected),
        ndcg(found, expected),
    )
