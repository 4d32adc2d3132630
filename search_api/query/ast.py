"""The parsed form of a search query: small immutable nodes, no engine knowledge.

The parser produces these; the OpenSearch builder, the vector-filter extractor and
``free_text`` consume them. Keeping the tree engine-neutral is what lets one query string
drive full-text, semantic and hybrid search alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TypeAlias


class QueryError(ValueError):
    """A query the user must fix; ``position`` is the 0-based offset of the offending text.

    A ``ValueError`` so generic input-validation handlers catch it, but its own type so the
    API maps it to 400 with the position instead of branching on message text.
    """

    def __init__(self, position: int, message: str) -> None:
        super().__init__(f"{message} (at position {position})")
        self.position = position
        self.message = message


@dataclass(frozen=True, slots=True)
class Term:
    """A free word, matched anywhere in subject or body; ``prefix`` for ``word*``.

    ``weight``: how much the word counts in the ranking — its rarity *within the mailbox*,
    set by the service from a statistics request (:mod:`.weights`); 1 until then.
    """

    text: str
    prefix: bool = False
    weight: float = 1.0


@dataclass(frozen=True, slots=True)
class Phrase:
    """A quoted phrase, matched unstemmed and in order; ``prefix`` for ``"a phra"*``."""

    text: str
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class Field:
    """``from:`` / ``to:`` / ``cc:`` / ``subject:`` with its value as typed.

    ``phrase`` when the value was quoted, ``prefix`` when it ended in ``*`` (stripped here).
    """

    name: str
    value: str
    phrase: bool = False
    prefix: bool = False


@dataclass(frozen=True, slots=True)
class DateBound:
    """``after:`` (``ts >= epoch_s``) or ``before:`` (``ts < epoch_s``), already resolved.

    The parser turns a day into its UTC bounds, so consumers compare integers only.
    """

    after: bool
    epoch_s: int


@dataclass(frozen=True, slots=True)
class Thread:
    """``thread:<key>``: the 64-hex thread key, lowercased."""

    key: str


@dataclass(frozen=True, slots=True)
class HasAttachment:
    """``has:attachment``."""


@dataclass(frozen=True, slots=True)
class Not:
    node: Node


@dataclass(frozen=True, slots=True)
class And:
    nodes: tuple[Node, ...]


@dataclass(frozen=True, slots=True)
class Or:
    nodes: tuple[Node, ...]


Node: TypeAlias = Term | Phrase | Field | DateBound | Thread | HasAttachment | Not | And | Or
