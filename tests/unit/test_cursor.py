"""Signed cursors: only what this service issued, shaped as its page needs (issue 16)."""

from __future__ import annotations

import base64
import hashlib
import hmac
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from search_api.cursor import CursorCodec, CursorError

KEY = "a" * 64
CODEC = CursorCodec("shared-key")


def forged(payload: object) -> str:
    raw = json.dumps(payload).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=") + ".AAAA"


def test_round_trip_and_binding_to_the_request() -> None:
    cursor = CODEC.encode("req", {"a": [1.5, 17, KEY], "n": 20})
    assert CODEC.decode(cursor, "req", sort_keys=3) == {"a": [1.5, 17, KEY], "n": 20}
    with pytest.raises(CursorError, match="belong"):
        CODEC.decode(cursor, "other", sort_keys=3)
    offset = CODEC.encode("req", {"o": 20})
    assert CODEC.decode(offset, "req", sort_keys=None) == {"o": 20}


def test_replicas_sharing_the_key_accept_each_others_cursors_others_do_not() -> None:
    cursor = CODEC.encode("req", {"o": 20})
    assert CursorCodec("shared-key").decode(cursor, "req", sort_keys=None) == {"o": 20}
    with pytest.raises(CursorError, match="not issued"):
        CursorCodec(None).decode(cursor, "req", sort_keys=None)


@pytest.mark.parametrize(
    "position",
    [
        {"a": 5},
        {"a": ["x", "y", "z"]},
        {"a": {"x": 1}},
        {"a": [None, None, None]},
        {"a": [1.0, 2, "not-a-key"]},
        {"a": [True, 2, KEY]},
        {"a": [1.0, 2**70, KEY]},
        {"o": "abc"},
        {"o": []},
        {"o": 1e400},
        {"o": -1},
        {"o": 10**9},
        {"a": [1.0, 2, KEY], "o": 5},
        {"a": [1.0, 2, KEY]},  # no rank
        {"a": [1.0, 2, KEY], "n": 0},
        {"a": [1.0, 2, KEY], "n": "5"},
    ],
)
def test_signed_but_misshapen_positions_are_refused(position: dict[str, object]) -> None:
    """Even a cursor carrying a valid MAC (a leaked key) cannot feed the engine junk."""
    cursor = CODEC.encode("req", position)
    for sort_keys in (3, None):
        with pytest.raises(CursorError):
            CODEC.decode(cursor, "req", sort_keys=sort_keys)


def test_nan_is_refused() -> None:
    raw = b'{"r":"req","a":[NaN,1,"' + KEY.encode() + b'"]}'
    body = base64.urlsafe_b64encode(raw).decode().rstrip("=")
    digest = hmac.new(b"shared-key", raw, hashlib.sha256).digest()  # correctly signed
    mac = base64.urlsafe_b64encode(digest).decode().rstrip("=")
    with pytest.raises(CursorError, match="not valid"):
        CODEC.decode(f"{body}.{mac}", "req", sort_keys=3)


@given(st.one_of(st.text(max_size=300), st.binary(max_size=300).map(lambda b: b.hex())))
def test_arbitrary_text_is_a_cursor_error(text: str) -> None:
    with pytest.raises(CursorError):
        CODEC.decode(text, "req", sort_keys=3)


def test_unsigned_forgeries_of_the_old_format_are_refused() -> None:
    with pytest.raises(CursorError):
        CODEC.decode(forged({"r": "req", "a": [1.0, 2, KEY]}), "req", sort_keys=3)
