"""The search query language: parse ``q``, build engine queries, fuse rankings.

Pure code (no client library): the API's routes wire it to the OpenSearch and Qdrant
adapters. See ``parser`` for the syntax and its precedence rules.
"""

from search_api.query.ast import (
    And,
    DateBound,
    Field,
    HasAttachment,
    Node,
    Not,
    Or,
    Phrase,
    QueryError,
    Term,
    Thread,
)
from search_api.query.fusion import HybridTuning, rrf
from search_api.query.highlight import highlight_spec, page_highlight_body
from search_api.query.opensearch import (
    build_query,
    build_search_body,
    collapse_spec,
    sort_spec,
)
from search_api.query.parser import MAX_CLAUSES, MAX_QUERY_LENGTH, free_text, parse
from search_api.query.vector_filter import VectorFilter, vector_filter

__all__ = [
    "MAX_CLAUSES",
    "MAX_QUERY_LENGTH",
    "And",
    "DateBound",
    "Field",
    "HasAttachment",
    "HybridTuning",
    "Node",
    "Not",
    "Or",
    "Phrase",
    "QueryError",
    "Term",
    "Thread",
    "VectorFilter",
    "build_query",
    "build_search_body",
    "collapse_spec",
    "free_text",
    "highlight_spec",
    "page_highlight_body",
    "parse",
    "rrf",
    "sort_spec",
    "vector_filter",
]
