"""The OpenSearch "more like this" request for a stored message: a plain dict, no client.

Used by "similar emails" beside the vector neighbours: the source document is named by id
(and routed to its mailbox), never by its text, so no user text reaches the engine. Like
every search it carries the mailbox filter; the source itself is always excluded and, when
asked, its whole thread.

How much of the source is compared: ``more_like_this`` looks up, in every segment, how many
documents hold each distinct term of the source, so a 238 KB patch (2,326 distinct body terms)
spent 168 of its 223 ms there at 100,000 messages. Where the index defines
:data:`LIKED_BODY_ANALYZER` (mapping version 5: ``mail_text`` behind a 2,000-token ``limit``),
the source's body is read through it: its first 2,000 tokens, which is the whole body of
97 % of mail. Candidates are matched on their whole body, as ever.
"""

from __future__ import annotations

from typing import Any

from search_api.query.opensearch import MAILBOX_FIELD

BODY_FIELD = "clean"
# The stemmed subject (without Re:/[tag] prefixes) and the body: what a message is about.
MLT_FIELDS = ("subject", BODY_FIELD)
# The analyzer of mappings/messages-v5.json that reads a liked body's first 2,000 tokens.
LIKED_BODY_ANALYZER = "mail_text_liked"


def more_like_this_body(
    *,
    index: str,
    doc_id: str,
    mailbox_id: str,
    thread_key: str | None,
    size: int,
    fields: tuple[str, ...] = MLT_FIELDS,
    liked_analyzer: str | None = None,
) -> dict[str, Any]:
    """Documents of ``mailbox_id`` sharing the most distinctive terms with ``doc_id``.

    ``min_doc_freq`` 1 and ``min_term_freq`` 1 keep rare words (a function name, a driver)
    usable in a small mailbox, where they are the best evidence; ``thread_key`` (when set)
    is excluded as a whole. ``fields`` narrows the comparison (``("subject",)``: what the
    message says it is about, its ``Re:``/``[tag]`` prefixes already stripped by the mapping).
    ``liked_analyzer`` (an analyzer the index defines, e.g. :data:`LIKED_BODY_ANALYZER`) reads
    the source's body in place of the field's own analyzer.
    """
    if not mailbox_id:
        raise ValueError("mailbox_id is required: every search is confined to one mailbox")
    must_not: list[dict[str, Any]] = [{"ids": {"values": [doc_id]}}]
    if thread_key:
        must_not.append({"term": {"thread_key": {"value": thread_key}}})
    like: dict[str, Any] = {"_index": index, "_id": doc_id, "routing": mailbox_id}
    if liked_analyzer and BODY_FIELD in fields:
        like["per_field_analyzer"] = {BODY_FIELD: liked_analyzer}
    mlt = {
        "fields": list(fields),
        "like": [like],
        "min_term_freq": 1,
        "min_doc_freq": 1,
        "max_query_terms": 25,
    }
    return {
        "query": {
            "bool": {
                "filter": [{"term": {MAILBOX_FIELD: mailbox_id}}],
                "must": [{"more_like_this": mlt}],
                "must_not": must_not,
            }
        },
        "size": size,
        "_source": ["message_key", "thread_key", "ts"],
    }
