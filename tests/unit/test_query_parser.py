"""The query language: syntax, precedence, dates, errors with positions, hostile input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search_api.query import (
    MAX_CLAUSES,
    MAX_QUERY_LENGTH,
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
    VectorFilter,
    free_text,
    parse,
    vector_filter,
)

KEY = "0123456789abcdef" * 4
KEY2 = "f" * 64
JAN31 = 1706659200  # 2024-01-31T00:00:00Z
FEB1 = JAN31 + 86400


def t(text: str, prefix: bool = False) -> Term:
    return Term(text, prefix)


# --- leaves -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("hello", t("hello")),
        ("Mik*", t("Mik", prefix=True)),
        ("foo**", t("foo", prefix=True)),
        ('"exact phrase"', Phrase("exact phrase")),
        ('"  spaced \t out  "', Phrase("spaced out")),
        ('"free b"*', Phrase("free b", prefix=True)),
        ("from:keithp@keithp.com", Field("from", "keithp@keithp.com")),
        ("FROM:Keith", Field("from", "Keith")),
        ("from:Mik*", Field("from", "Mik", prefix=True)),
        ('from:"Keith Packard"', Field("from", "Keith Packard", phrase=True)),
        ("to:alice", Field("to", "alice")),
        ("cc:example.org", Field("cc", "example.org")),
        ("subject:meeting", Field("subject", "meeting")),
        ('subject:"a phrase"', Field("subject", "a phrase", phrase=True)),
        ("subject:FreeB*", Field("subject", "FreeB", prefix=True)),
        ('subject:"free b"*', Field("subject", "free b", phrase=True, prefix=True)),
        (f"thread:{KEY}", Thread(KEY)),
        (f"thread:{KEY.upper()}", Thread(KEY)),
        ("has:attachment", HasAttachment()),
        ("has:Attachments", HasAttachment()),
    ],
)
def test_leaves(q: str, expected: Node) -> None:
    assert parse(q) == expected


@pytest.mark.parametrize(
    "q",
    ["foo:bar", "mailbox_id:other", "re:", "*:*", "*", "*foo", "a*b", "_id:1", "{query:x}"],
)
def test_unknown_operators_and_stray_stars_are_literal_words(q: str) -> None:
    assert parse(q) == t(q)


def test_dsl_fragment_is_only_literal_text() -> None:
    node = parse('{"query":{"match_all":{}}}')
    assert node == And((t("{"), Phrase("query"), t(":{"), Phrase("match_all"), t(":{}}}")))


def test_unicode_and_control_characters() -> None:
    assert parse("accentué 😀") == And((t("accentué"), t("😀")))
    assert parse("a\u0000b") == And((t("a"), t("b")))
    assert parse("caf*") == t("caf", prefix=True)
    assert parse("é*") == t("é", prefix=True)
    with pytest.raises(QueryError):
        parse("\u0000")


# --- dates --------------------------------------------------------------------------------


@pytest.mark.parametrize("day", ["2024-01-31", "2024/01/31"])
def test_day_bounds_are_inclusive_utc_days(day: str) -> None:
    assert parse(f"after:{day}") == DateBound(True, JAN31)
    assert parse(f"before:{day}") == DateBound(False, FEB1)
    assert parse(f"after:{day} before:{day}") == And(
        (DateBound(True, JAN31), DateBound(False, FEB1))
    )


@pytest.mark.parametrize(
    ("value", "epoch"),
    [
        ("2024-01-31T10:00:00Z", JAN31 + 36000),
        ("2024-01-31T10:00:00", JAN31 + 36000),
        ("2024-01-31T10:00:00+02:00", JAN31 + 28800),
        ("2024-01-31T10:00", JAN31 + 36000),
        ("2024-01-31T10:00:00.25Z", JAN31 + 36001),
    ],
)
def test_datetimes_are_instants_rounded_up(value: str, epoch: int) -> None:
    assert parse(f"after:{value}") == DateBound(True, epoch)
    assert parse(f"before:{value}") == DateBound(False, epoch)


def test_extreme_dates() -> None:
    assert parse("before:9999-12-31") == DateBound(False, 253402300800)
    assert parse("after:1969-12-31") == DateBound(True, -86400)


# --- boolean structure --------------------------------------------------------------------


def test_free_terms_are_anded() -> None:
    assert parse("a b c") == And((t("a"), t("b"), t("c")))
    assert parse("a AND b") == parse("a b")


def test_or_binds_tighter_than_implicit_and() -> None:
    assert parse("a b OR c") == And((t("a"), Or((t("b"), t("c")))))
    assert parse("a OR b c") == And((Or((t("a"), t("b"))), t("c")))
    assert parse("a OR b c OR d") == And((Or((t("a"), t("b"))), Or((t("c"), t("d")))))
    assert parse("a OR b OR c") == Or((t("a"), t("b"), t("c")))
    assert parse("a AND b OR c") == And((t("a"), Or((t("b"), t("c")))))


def test_lowercase_or_is_a_word() -> None:
    assert parse("a or b") == And((t("a"), t("or"), t("b")))


def test_parentheses_group_and_flatten() -> None:
    assert parse("(a b) OR c") == Or((And((t("a"), t("b"))), t("c")))
    assert parse("a (b c)") == And((t("a"), t("b"), t("c")))
    assert parse("((a))") == t("a")
    assert parse("(a OR b) OR c") == Or((t("a"), t("b"), t("c")))
    assert parse("x(y)") == And((t("x"), t("y")))


@pytest.mark.parametrize(
    ("q", "expected"),
    [
        ("-spam", Not(t("spam"))),
        ("-from:bob", Not(Field("from", "bob"))),
        ('-"a phrase"', Not(Phrase("a phrase"))),
        ("-(a OR b)", Not(Or((t("a"), t("b"))))),
        (f"-thread:{KEY}", Not(Thread(KEY))),
        ("-has:attachment", Not(HasAttachment())),
        ("--a", t("a")),
        ("-(-a)", t("a")),
        ("a -b", And((t("a"), Not(t("b"))))),
        ("a OR -b", Or((t("a"), Not(t("b"))))),
        ("-a OR b", Or((Not(t("a")), t("b")))),
        ("e-mail", t("e-mail")),
        ("-5x", Not(t("5x"))),
    ],
)
def test_negation(q: str, expected: Node) -> None:
    assert parse(q) == expected


def test_combined_query() -> None:
    q = f'from:Mik* "release notes" (bug OR issue) -wontfix after:2024/01/31 thread:{KEY}'
    assert parse(q) == And(
        (
            Field("from", "Mik", prefix=True),
            Phrase("release notes"),
            Or((t("bug"), t("issue"))),
            Not(t("wontfix")),
            DateBound(True, JAN31),
            Thread(KEY),
        )
    )


# --- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("q", "position", "fragment"),
    [
        ("", 0, "empty query"),
        ("   ", 0, "empty query"),
        ("(a", 0, "never closed"),
        ("a (b (c)", 2, "never closed"),
        ("a)", 1, "without '('"),
        (") OR (", 0, "without '('"),
        ("()", 0, "empty parentheses"),
        ('say "hello', 4, "unbalanced quote"),
        ('""', 0, "empty phrase"),
        ("a OR", 2, "dangling OR"),
        ("OR a", 0, "dangling OR"),
        ("a OR OR b", 2, "dangling OR"),
        ("(a OR) b", 3, "dangling OR"),
        ("a AND", 2, "dangling AND"),
        ("AND a", 0, "dangling AND"),
        ("a - b", 2, "empty negation"),
        ("a -", 2, "empty negation"),
        ("(a -)", 3, "empty negation"),
        ("-OR a", 0, "empty negation"),
        ("after:2024-13-01", 6, "bad date"),
        ("before:yesterday", 7, "bad date"),
        ("after:2024-01/31", 6, "bad date"),
        ("after:2024-01-31T25:00", 6, "bad date"),
        ("thread:abc", 7, "64-hex"),
        (f"thread:{'g' * 64}", 7, "64-hex"),
        ("has:pdf", 4, "has:"),
        ("from:", 5, "needs a value"),
        ('x subject:""', 10, "empty phrase"),
        ('to:"unclosed', 3, "unbalanced quote"),
    ],
)
def test_errors_carry_positions(q: str, position: int, fragment: str) -> None:
    with pytest.raises(QueryError) as info:
        parse(q)
    assert info.value.position == position
    assert fragment in info.value.message
    assert isinstance(info.value, ValueError)


def test_length_limit() -> None:
    parse("a" * MAX_QUERY_LENGTH)
    with pytest.raises(QueryError) as info:
        parse("a" * 2000)
    assert info.value.position == MAX_QUERY_LENGTH


def test_clause_limit() -> None:
    parse(" ".join(["a"] * MAX_CLAUSES))
    with pytest.raises(QueryError) as info:
        parse(" ".join(["a"] * (MAX_CLAUSES + 1)))
    assert info.value.position == 2 * MAX_CLAUSES
    assert "too many clauses" in info.value.message


def test_nesting_limit() -> None:
    parse("(" * 32 + "a" + ")" * 32)
    with pytest.raises(QueryError) as info:
        parse("(" * 400 + "a" + ")" * 400)
    assert "nested" in info.value.message


# --- free text and vector filter ----------------------------------------------------------


def test_free_text_keeps_positive_words_and_phrases_only() -> None:
    node = parse(f'budget "q3 plan" -draft from:bob (report OR memo*) thread:{KEY} -(x y)')
    assert free_text(node) == "budget q3 plan report memo"
    assert free_text(parse("from:bob")) == ""


def test_vector_filter_keeps_top_level_payload_constraints() -> None:
    q = (
        f"budget thread:{KEY} -thread:{KEY2} after:2024-01-01 after:2024/01/31 "
        "before:2024-02-29 before:2024-01-31 from:Bob@Example.com "
        "(from:bob@example.com OR from:al@example.com) to:x has:attachment subject:y"
    )
    assert vector_filter(parse(q), "mb") == VectorFilter(
        mailbox_id="mb",
        thread_key=KEY,
        ts_gte=JAN31,
        ts_lt=FEB1,
        from_addresses=("bob@example.com",),
        exclude_thread_keys=(KEY2,),
    )


def test_vector_filter_ignores_what_payload_cannot_express() -> None:
    for q in [
        "from:bob",
        "from:Mik*",
        "from:example.com",
        f"a OR thread:{KEY}",
        "-from:a@b.c",
        f"(thread:{KEY} a) OR b",
        "to:a@b.c",
    ]:
        assert vector_filter(parse(q), "mb") == VectorFilter("mb"), q
    assert vector_filter(parse("from:a@b.c OR from:d@e.f"), "mb").from_addresses == (
        "a@b.c",
        "d@e.f",
    )


def test_vector_filter_flags_contradictions() -> None:
    assert vector_filter(parse(f"thread:{KEY} thread:{KEY2}"), "mb").match_none
    assert vector_filter(parse(f"thread:{KEY} -thread:{KEY}"), "mb").match_none
    assert vector_filter(parse("from:a@b.c from:d@e.f"), "mb").match_none
    assert vector_filter(parse("after:2024-02-01 before:2024-01-31"), "mb").match_none
    assert not vector_filter(parse("after:2024-01-31 before:2024-01-31"), "mb").match_none
    with pytest.raises(ValueError):
        vector_filter(parse("a"), "")


# --- properties ---------------------------------------------------------------------------

QUERY_ALPHABET = st.sampled_from(
    [
        *'abcXYZ019 :-*"()@./_{}',
        "OR",
        "AND",
        "from:",
        "to:",
        "cc:",
        "subject:",
        "thread:",
        "after:",
        "before:",
        "has:",
        "attachment",
        "2024-01-31",
        "é",
        "😀",
        "\u0000",
        "\t",
        KEY,
    ]
)


@settings(max_examples=400, deadline=None)
@given(st.one_of(st.text(max_size=300), st.lists(QUERY_ALPHABET, max_size=60).map("".join)))
def test_parse_returns_a_node_or_raises_query_error(q: str) -> None:
    try:
        node = parse(q)
    except QueryError as error:
        position = error.position
        assert 0 <= position <= max(len(q), MAX_QUERY_LENGTH)
        return
    assert isinstance(
        node, Term | Phrase | Field | DateBound | Thread | HasAttachment | Not | And | Or
    )
    assert isinstance(free_text(node), str)
    assert isinstance(vector_filter(node, "mb"), VectorFilter)
