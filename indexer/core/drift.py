"""Compare what the table says each index must hold with what the index holds (pure).

Used by ``sidecar reconcile``. Both sides go through the same *view* function, so a value
compares equal exactly when the pipeline would have written it: the full-text view is the
search document minus the participant fields (they come from the sidecar's own participant
store, not the mail table) with ``clean`` reduced to its hash (the text can be large); the
vector view is the point payload, whose ``content_hash`` stands for the embedded text (the
recipe of the collection searches read, :mod:`indexer.core.recipes`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from indexer.core.documents import MessageState, search_document, text_hash, vector_target
from indexer.core.plan import MessageRef
from indexer.core.recipes import DEFAULT_RECIPE, Recipe

Index = Literal["fulltext", "vectors"]
Kind = Literal["missing", "orphan", "stale"]
INDEXES: tuple[Index, ...] = ("fulltext", "vectors")
KINDS: tuple[Kind, ...] = ("missing", "orphan", "stale")

# Fields of the search document that the mail table alone decides.
FULLTEXT_FIELDS = (
    "mailbox_id",
    "message_key",
    "message_id",
    "thread_key",
    "thread_id",
    "subject",
    "clean",
    "from",
    "ts",
    "date",
    "attachment_count",
    "size_bytes",
    "clean_fallback",
    "spec_version",
    "in_reply_to",
)

View = Mapping[str, Any]


@dataclass(frozen=True, slots=True, order=True)
class Drift:
    """One index disagreeing with the table about one message.

    ``missing``: the table holds it, the index does not; ``orphan``: the index holds it, the
    table does not (or the index must hold nothing, e.g. a point for a blank ``forai``);
    ``stale``: both hold it but ``fields`` differ.
    """

    index: Index
    kind: Kind
    ref: MessageRef
    fields: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "kind": self.kind,
            "mailbox_id": self.ref.mailbox_id,
            "message_key": self.ref.message_key,
            "fields": list(self.fields),
        }


def fulltext_view(doc: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The comparable part of a search document (ours or an index ``_source``)."""
    if doc is None:
        return None
    view = {name: doc.get(name) for name in FULLTEXT_FIELDS}
    clean = view.get("clean")
    view["clean"] = text_hash(clean) if isinstance(clean, str) else None
    return view


def vector_view(payload: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The comparable point payload (None: no point)."""
    return dict(payload) if payload is not None else None


def expected_views(
    state: MessageState, recipe: Recipe = DEFAULT_RECIPE
) -> dict[Index, dict[str, Any] | None]:
    """What each index must hold for a message in this table state (None: nothing); the
    vectors under ``recipe``, the one of the collection compared."""
    target = vector_target(state, recipe)
    return {
        "fulltext": fulltext_view(search_document(state)),
        "vectors": vector_view(target.payload) if target.text is not None else None,
    }


def compare(
    index: Index,
    expected: Mapping[MessageRef, View | None],
    actual: Mapping[MessageRef, View],
) -> list[Drift]:
    """Drift of one index: ``expected`` covers every message the table holds (None = the
    index must hold nothing for it); ``actual`` every entry the index holds."""
    drift: list[Drift] = []
    for ref, want in expected.items():
        have = actual.get(ref)
        if want is not None and have is None:
            drift.append(Drift(index, "missing", ref))
        elif want is None and have is not None:
            drift.append(Drift(index, "orphan", ref))
        elif want is not None and have is not None and want != have:
            diff = tuple(sorted(k for k in set(want) | set(have) if want.get(k) != have.get(k)))
            drift.append(Drift(index, "stale", ref, diff))
    drift.extend(Drift(index, "orphan", ref) for ref in actual if ref not in expected)
    return sorted(drift)


def counts(drift: Iterable[Drift]) -> dict[str, int]:
    """``{"fulltext.missing": n, ...}`` for every index and kind (zeros included)."""
    totals = {f"{i}.{k}": 0 for i in INDEXES for k in KINDS}
    for item in drift:
        totals[f"{item.index}.{item.kind}"] += 1
    return totals
