"""The part of a parsed query that the Qdrant payload can enforce in semantic mode.

A vector point carries only ``mailbox_id``, ``message_key``, ``thread_key``, ``ts`` and
``from`` (the lowercased sender address; see ``indexer.core.documents.vector_target``). So
only constraints ANDed at the top level of the query and expressible on those fields are
kept: ``thread:``, ``-thread:``, ``after:``, ``before:`` and ``from:`` with an exact, full
address (or an ``OR`` of such). Everything else -- words and phrases (they become the
embedded text instead, see ``parser.free_text``), ``to:``, ``cc:``, ``subject:``,
``has:attachment``, partial addresses, prefixes, other negations and anything under an
``OR`` -- is ignored in semantic mode; hybrid search applies it through the full-text side.
The mailbox constraint is always present.
"""

from __future__ import annotations

from dataclasses import dataclass

from search_api.query.ast import And, DateBound, Field, Node, Not, Or, Thread


@dataclass(frozen=True, slots=True)
class VectorFilter:
    """Payload conditions, all ANDed; empty tuples and ``None`` mean "no condition".

    ``from_addresses`` means "sent by any of these". ``exclude_message_keys`` is never set
    by the query language: it is for callers, e.g. "more like this" leaving out its source.
    ``match_none`` flags contradictory constraints (two different ``thread:`` keys,
    disjoint senders, an empty date range): the caller can answer "no hits" without asking.
    """

    mailbox_id: str
    thread_key: str | None = None
    ts_gte: int | None = None
    ts_lt: int | None = None
    from_addresses: tuple[str, ...] = ()
    exclude_thread_keys: tuple[str, ...] = ()
    exclude_message_keys: tuple[str, ...] = ()
    match_none: bool = False


def _exact_address(node: Node) -> str | None:
    """The lowercased address if ``node`` is ``from:`` with a whole address, else None."""
    if not isinstance(node, Field) or node.name != "from" or node.prefix:
        return None
    local, at, domain = node.value.strip().lower().rpartition("@")
    if not at or not local or not domain or any(c.isspace() for c in node.value.strip()):
        return None
    return f"{local}@{domain}"


def _senders(node: Node) -> set[str] | None:
    """The senders ``node`` allows, when it is an exact ``from:`` or an OR of only those."""
    children = node.nodes if isinstance(node, Or) else (node,)
    addresses = [_exact_address(child) for child in children]
    if any(address is None for address in addresses):
        return None
    return {address for address in addresses if address is not None}


def vector_filter(node: Node, mailbox_id: str) -> VectorFilter:
    """Extract the payload-expressible, top-level ANDed constraints of ``node``."""
    if not mailbox_id:
        raise ValueError("mailbox_id is required: every search is confined to one mailbox")
    threads: set[str] = set()
    excluded: set[str] = set()
    senders: set[str] | None = None
    ts_gte: int | None = None
    ts_lt: int | None = None
    for clause in node.nodes if isinstance(node, And) else (node,):
        if isinstance(clause, Thread):
            threads.add(clause.key)
        elif isinstance(clause, Not) and isinstance(clause.node, Thread):
            excluded.add(clause.node.key)
        elif isinstance(clause, DateBound) and clause.after:
            ts_gte = clause.epoch_s if ts_gte is None else max(ts_gte, clause.epoch_s)
        elif isinstance(clause, DateBound):
            ts_lt = clause.epoch_s if ts_lt is None else min(ts_lt, clause.epoch_s)
        elif (allowed := _senders(clause)) is not None:
            senders = allowed if senders is None else senders & allowed
    match_none = (
        len(threads) > 1
        or bool(threads & excluded)
        or senders == set()
        or (ts_gte is not None and ts_lt is not None and ts_gte >= ts_lt)
    )
    return VectorFilter(
        mailbox_id=mailbox_id,
        thread_key=min(threads) if threads else None,
        ts_gte=ts_gte,
        ts_lt=ts_lt,
        from_addresses=tuple(sorted(senders or ())),
        exclude_thread_keys=tuple(sorted(excluded)),
        match_none=match_none,
    )
