"""Parse the ``q`` parameter of the search API into an engine-neutral tree.

Grammar (notmuch/Xapian style; whitespace separates, ``AND`` is optional)::

    query   := conj
    conj    := disj ( [AND] disj )*          implicit AND: loosest
    disj    := unary ( OR unary )*           OR binds tighter than implicit AND
    unary   := "-"* primary                  "-" must touch what it negates
    primary := "(" conj ")" | leaf

So ``a b OR c`` is ``a AND (b OR c)`` and ``a OR b c OR d`` is ``(a OR b) AND (c OR d)``:
the same grouping notmuch gives, and the one users get when they type alternatives.

Leaves: free words (``word``, ``prefix*``), ``"phrases"`` (``"phra"*`` for a phrase prefix),
``from:`` ``to:`` ``cc:`` ``subject:`` (value a word, ``prefix*`` or ``"quoted"``),
``thread:<64 hex>``, ``after:`` / ``before:`` (``2024-01-31``, ``2024/01/31`` or an ISO 8601
date-time), notmuch's ``date:D`` (that whole day), ``date:A..B`` (from A to B, both
inclusive), ``date:A..`` / ``date:..B``, and ``has:attachment``. Operator names are
case-insensitive; ``OR``/``AND`` must be uppercase (lowercase ones are words). Anything else
that looks like an operator (``foo:bar``, ``mailbox_id:x``, ``*:*``) is a literal word: the
user's text only ever becomes a leaf value, never query syntax of the engine. A ``*`` only
makes a prefix after at least one letter or digit, so no leading or bare wildcard ever
reaches the engine.

Dates are resolved to whole UTC days, both bounds inclusive of the named day:
``after:D`` is ``ts >= D 00:00:00Z`` and ``before:D`` is ``ts < (D + 1 day) 00:00:00Z``.
A date-time names an instant instead (naive means UTC): ``after:`` keeps messages at or
after it, ``before:`` those strictly before it; as ``ts`` is whole seconds, a fractional
instant is rounded up for both, which keeps both comparisons exact.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from datetime import UTC, date, datetime

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

MAX_QUERY_LENGTH = 1024
MAX_CLAUSES = 64
# Bounds recursion (each level costs a few frames) well below Python's limit.
MAX_DEPTH = 32

ADDRESS_FIELDS = frozenset({"from", "to", "cc"})
TEXT_FIELDS = ADDRESS_FIELDS | {"subject"}
_OPERATORS = TEXT_FIELDS | {"thread", "after", "before", "date", "has"}
_HAS_VALUES = frozenset({"attachment", "attachments"})

_OPERATOR = re.compile(r"([A-Za-z]+):(.*)", re.DOTALL)
_HEX64 = re.compile(r"[0-9a-fA-F]{64}")
_DAY = re.compile(r"(\d{4})([-/])(\d{2})\2(\d{2})", re.ASCII)
_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\S+", re.ASCII)
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_DAY_S = 86_400


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str  # "(", ")", "OR", "AND", "-" or "leaf"
    pos: int
    node: Node | None = None


def _is_sep(char: str) -> bool:
    # Control characters (NUL included) separate like spaces rather than reach the engine.
    return char.isspace() or unicodedata.category(char) == "Cc"


def _split_prefix(text: str) -> tuple[str, bool]:
    """``mik*`` -> (``mik``, True); a star without a letter or digit before it stays literal."""
    if text.endswith("*"):
        stem = text.rstrip("*")
        if any(c.isalnum() for c in stem):
            return stem, True
    return text, False


def _ceil_epoch(moment: datetime) -> int:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    delta = moment - _EPOCH
    return delta.days * _DAY_S + delta.seconds + (1 if delta.microseconds else 0)


def _date_bound(value: str, pos: int, *, after: bool) -> int:
    """The epoch-second bound of ``after:``/``before:`` (see the module docstring)."""
    day = _DAY.fullmatch(value)
    try:
        if day:
            start = (date(int(day[1]), int(day[3]), int(day[4])) - date(1970, 1, 1)).days * _DAY_S
            return start if after else start + _DAY_S
        if _DATETIME.fullmatch(value):
            return _ceil_epoch(datetime.fromisoformat(value))
    except (ValueError, OverflowError):
        pass
    raise QueryError(pos, "bad date: use YYYY-MM-DD, YYYY/MM/DD or an ISO 8601 date-time")


def _operator_node(name: str, value: str, pos: int, *, phrase: bool, prefix: bool) -> Node:
    if name in TEXT_FIELDS:
        if not phrase:
            value, prefix = _split_prefix(value)
        return Field(name, value, phrase=phrase, prefix=prefix)
    if name == "thread":
        if not _HEX64.fullmatch(value):
            raise QueryError(pos, "thread: needs a 64-hex-digit thread key")
        return Thread(value.lower())
    if name == "has":
        if value.lower() not in _HAS_VALUES:
            raise QueryError(pos, "unknown has: value (expected has:attachment)")
        return HasAttachment()
    if name == "date":
        return _date_range(value, pos)
    return DateBound(name == "after", _date_bound(value, pos, after=name == "after"))


def _date_range(value: str, pos: int) -> Node:
    """``date:D`` = ``after:D before:D``; ``date:A..B`` = ``after:A before:B`` (open ends ok)."""
    start, dots, end = value.partition("..")
    if not dots:
        start = end = value
    if not start and not end:
        raise QueryError(pos, "date: needs a day or a range A..B")
    bounds = []
    if start:
        bounds.append(DateBound(True, _date_bound(start, pos, after=True)))
    if end:
        end_pos = pos + len(start) + len(dots)
        bounds.append(DateBound(False, _date_bound(end, end_pos, after=False)))
    return bounds[0] if len(bounds) == 1 else And(tuple(bounds))


class _Lexer:
    """Splits ``q`` into tokens; leaves are resolved (and validated) here already."""

    def __init__(self, q: str) -> None:
        self.q = q
        self.i = 0
        self.tokens: list[_Token] = []
        self.leaves = 0

    def run(self) -> list[_Token]:
        while self.i < len(self.q):
            char = self.q[self.i]
            if _is_sep(char):
                self.i += 1
            elif char in "()":
                self.tokens.append(_Token(char, self.i))
                self.i += 1
            elif char == "-":
                self._negation()
            elif char == '"':
                start = self.i
                text, prefix = self._quoted()
                self._leaf(start, Phrase(text, prefix))
            else:
                self._word()
        return self.tokens

    def _negation(self) -> None:
        start = self.i
        nxt = self.q[start + 1 : start + 2]
        if not nxt or _is_sep(nxt) or nxt == ")":
            raise QueryError(start, "empty negation: '-' must touch what it excludes")
        self.tokens.append(_Token("-", start))
        self.i += 1

    def _quoted(self) -> tuple[str, bool]:
        """The phrase opening at ``self.i`` (whitespace normalised), and a trailing ``*``."""
        start = self.i
        end = self.q.find('"', start + 1)
        if end < 0:
            raise QueryError(start, "unbalanced quote")
        text = " ".join(self.q[start + 1 : end].split())
        if not text:
            raise QueryError(start, "empty phrase")
        self.i = end + 1
        prefix = self.q.startswith("*", self.i)
        if prefix:
            self.i += 1
        return text, prefix

    def _word(self) -> None:
        start = end = self.i
        while end < len(self.q) and not _is_sep(self.q[end]) and self.q[end] not in '()"':
            end += 1
        word = self.q[start:end]
        self.i = end
        if word in ("OR", "AND"):
            self.tokens.append(_Token(word, start))
            return
        match = _OPERATOR.fullmatch(word)
        if match is None or match[1].lower() not in _OPERATORS:
            text, prefix = _split_prefix(word)
            self._leaf(start, Term(text, prefix))
            return
        name, value, vpos = match[1].lower(), match[2], start + len(match[1]) + 1
        phrase = prefix = False
        if not value:
            if not self.q.startswith('"', self.i):
                raise QueryError(vpos, f"{name}: needs a value")
            vpos = self.i
            value, prefix = self._quoted()
            phrase = True
        self._leaf(start, _operator_node(name, value, vpos, phrase=phrase, prefix=prefix))

    def _leaf(self, pos: int, node: Node) -> None:
        self.leaves += 1
        if self.leaves > MAX_CLAUSES:
            raise QueryError(pos, f"too many clauses (at most {MAX_CLAUSES})")
        self.tokens.append(_Token("leaf", pos, node))


def _and(nodes: list[Node]) -> Node:
    flat: list[Node] = []
    for node in nodes:
        flat.extend(node.nodes if isinstance(node, And) else (node,))
    return flat[0] if len(flat) == 1 else And(tuple(flat))


def _or(nodes: list[Node]) -> Node:
    flat: list[Node] = []
    for node in nodes:
        flat.extend(node.nodes if isinstance(node, Or) else (node,))
    return flat[0] if len(flat) == 1 else Or(tuple(flat))


_STOPS = frozenset({")", "OR", "AND"})


class _Parser:
    """Recursive descent over the tokens; see the grammar in the module docstring."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.tokens = tokens
        self.i = 0

    def peek(self, ahead: int = 0) -> _Token | None:
        j = self.i + ahead
        return self.tokens[j] if j < len(self.tokens) else None

    def _needs_operand(self, tok: _Token, what: str) -> None:
        nxt = self.peek(1)
        if nxt is None or nxt.kind in _STOPS:
            raise QueryError(tok.pos, f"dangling {what}: it needs a clause on both sides")

    def conj(self, depth: int) -> list[Node]:
        operands: list[Node] = []
        while (tok := self.peek()) is not None and tok.kind != ")":
            if tok.kind == "AND":
                if not operands:
                    raise QueryError(tok.pos, "dangling AND: it needs a clause on both sides")
                self._needs_operand(tok, "AND")
                self.i += 1
                continue
            operands.append(self.disj(depth))
        return operands

    def disj(self, depth: int) -> Node:
        items = [self.unary(depth)]
        while (tok := self.peek()) is not None and tok.kind == "OR":
            self._needs_operand(tok, "OR")
            self.i += 1
            items.append(self.unary(depth))
        return _or(items)

    def unary(self, depth: int) -> Node:
        first = self.peek()
        negations = 0
        while (tok := self.peek()) is not None and tok.kind == "-":
            negations += 1
            self.i += 1
        if tok is not None and tok.kind == "OR" and not negations:
            raise QueryError(tok.pos, "dangling OR: it needs a clause on both sides")
        if tok is None or tok.kind in _STOPS:
            # Only reachable after a '-' (conj and disj never call here on a stop otherwise).
            pos = first.pos if first is not None else 0
            raise QueryError(pos, "empty negation: '-' must touch what it excludes")
        node = self.primary(depth)
        if negations % 2 == 0:
            return node
        # '-(-a)' is 'a': keeps the tree (and the engine query) free of double negations.
        return node.node if isinstance(node, Not) else Not(node)

    def primary(self, depth: int) -> Node:
        tok = self.tokens[self.i]
        self.i += 1
        if tok.kind == "leaf" and tok.node is not None:
            return tok.node
        if depth + 1 > MAX_DEPTH:
            raise QueryError(tok.pos, f"too deeply nested (at most {MAX_DEPTH} levels)")
        operands = self.conj(depth + 1)
        closing = self.peek()
        if closing is None:
            raise QueryError(tok.pos, "unbalanced parenthesis: '(' is never closed")
        if not operands:
            raise QueryError(tok.pos, "empty parentheses")
        self.i += 1
        return _and(operands)


def parse(q: str) -> Node:
    """Parse ``q``; raises ``QueryError`` (never anything else) for input the user must fix."""
    if len(q) > MAX_QUERY_LENGTH:
        raise QueryError(MAX_QUERY_LENGTH, f"query longer than {MAX_QUERY_LENGTH} characters")
    parser = _Parser(_Lexer(q).run())
    operands = parser.conj(0)
    leftover = parser.peek()
    if leftover is not None:
        raise QueryError(leftover.pos, "unbalanced parenthesis: ')' without '('")
    if not operands:
        raise QueryError(0, "empty query")
    return _and(operands)


def free_text(node: Node) -> str:
    """The positive free words and phrases, space-joined: the text to embed for semantic search.

    Negated parts are left out (embedding them would pull results towards what the user
    excluded); operators are structured filters, not meaning.
    """
    parts: list[str] = []
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, Term | Phrase):
            parts.append(current.text)
        elif isinstance(current, And | Or):
            stack.extend(reversed(current.nodes))
    return " ".join(parts)
