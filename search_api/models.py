"""The API's contract: every answer's shape, as pydantic models the routes declare.

The routes hand FastAPI plain dicts (``service.render`` builds a hit) and these models are
their ``response_model``: so ``/openapi.json`` describes what is really sent, a client
generator gets real types instead of ``additionalProperties: true``, and a field the model
does not name (``bcc``, or anything a hot row grows later) can never reach a caller — the
model is a whitelist, not a description.

The JSON is the one the API always sent: the routes serialise with
``response_model_exclude_unset``, so a field that does not apply to a hit (``highlights``
outside full text, ``thread_hits`` without ``collapse``) is *left out*, never ``null``. Such a
field is declared with :func:`omittable`: not required, no default, not nullable, which is
what a generated client reads as "may be unset".
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


def omittable(description: str) -> Any:
    """A field the answer leaves out where it does not apply (never ``null``).

    Typed as ``Any`` for mypy's sake: the model's annotation (``int``, ``list[str]``) is the
    field's type; the ``None`` default only marks it unset and is never serialised."""
    return Field(default=None, description=description, json_schema_extra=_no_default)


class Sender(BaseModel):
    """The ``from`` of a message, from its hot row."""

    email: str | None = Field(description="Lower-cased address; null when the mail had none.")
    name: str | None = Field(description="Display name; null when the mail had none.")


class Highlights(BaseModel):
    """Snippets of the matched text, the matches marked with ``<mark>`` (HTML-escaped)."""

    subject: list[str] = omittable("Snippets of the subject (left out when none matched).")
    clean: list[str] = omittable("Snippets of the body (left out when none matched).")


class Hit(BaseModel):
    """One message as a search or similar answer shows it: identity, score, snippets and the
    hot row's fields (never its recipients beyond ``from``: no to, cc or bcc)."""

    model_config = ConfigDict(populate_by_name=True)

    message_key: str = Field(description="sha256 of the Message-ID: the message's key.")
    thread_key: str = Field(description="sha256 of the thread id (`thread:` operator).")
    score: float = Field(
        description="1 / (1 + rank) unless the deployment exposes the engines' raw scores."
    )
    sender: Sender = Field(alias="from")
    message_id: str | None
    thread_id: str | None
    subject: str | None
    date: str | None = Field(description="The message's Date, as the mail gave it.")
    ts: int | None = Field(description="The message's time, Unix seconds (UTC).")
    forai: str | None = Field(description="The message's `forAI` text (the writer cuts it).")
    attachment_count: int | None
    size_bytes: int | None
    spec_version: str | None
    in_reply_to: str | None
    clean_fallback: bool = Field(description="The mail's `processing.cleanFallback` flag.")
    thread_messages: int | None = Field(
        description="Messages in the hit's thread (null while its summary is not stored)."
    )
    highlights: Highlights = omittable(
        "Snippets: always in full-text mode, in hybrid mode when the query has free text, "
        "never in semantic mode nor on similar answers."
    )
    thread_hits: int = omittable(
        "Matching messages in this hit's thread (only with `collapse=thread`)."
    )


class DidYouMean(BaseModel):
    """A corrected query built from the mailbox's own words, and its number of hits."""

    q: str = Field(description="The query with its unknown or rare words corrected.")
    hits: int = Field(description="Messages the corrected query matches in this mailbox.")


class SearchPage(BaseModel):
    """One page of a search and where the next one starts."""

    hits: list[Hit]
    next_cursor: str | None = Field(
        description="Pass as `cursor` (same q, mode, collapse, sort) for the next page; "
        "null on the last page. Opaque and signed: a changed or foreign cursor is a 400."
    )
    did_you_mean: DidYouMean | None = Field(
        default=None,
        description="On the first page of a full-text or hybrid search whose words the "
        "mailbox lacks (or holds in very few messages): the query with them corrected to "
        "words of this mailbox, and its hit count; null when there is nothing better. Left "
        "out on semantic searches and later pages.",
        json_schema_extra=_no_default,
    )


class SimilarPage(BaseModel):
    """The messages most like a stored one, best first (one page, no cursor)."""

    hits: list[Hit]


class Contact(BaseModel):
    """One correspondent of the mailbox (From, To or Cc of its messages; never Bcc)."""

    email: str = Field(description="The address, lower-cased and accent-folded as indexed.")
    name: str | None = Field(
        description="Display name in the latest message it appeared in; null when none."
    )
    messages: int = Field(description="Messages of the mailbox it appears in (From, To, Cc).")
    last_ts: int = Field(description="Its latest message's time, Unix seconds (UTC).")


class ContactsPage(BaseModel):
    """The mailbox's correspondents matching a prefix, most frequent and recent first."""

    contacts: list[Contact]


class Health(BaseModel):
    """The process answers (liveness): nothing behind it is asked."""

    status: Literal["ok"]


class Readiness(BaseModel):
    """Whether every engine this process needs answers (the same body with 200 and 503)."""

    ready: bool
    failing: list[str] = Field(description="Components that did not answer.")
    skipped: list[str] = Field(description="Components this replica does not use.")
    serving: list[str] = Field(
        default_factory=list,
        description="Kinds of search this replica can serve now (`fulltext`: OpenSearch and "
        "the table; `semantic`: Qdrant, the model and the table; hybrid and similar need "
        "both); "
        "the answer is 503 only when this is empty.")
    warnings: dict[str, str] = omittable(
        "Not failures (everything is served): `mapping` when the live index is on an older "
        "mapping version than this release's (`sidecar reindex`; docs/operations/upgrading.md)."
    )
    errors: dict[str, str] = omittable(
        "A fixed code per failing component (a missing table, credentials the engine "
        "refused, the model loading, no answer): never the engine's own message, which names "
        "accounts, roles and resources; that detail is in the API's log."
    )


class Problem(BaseModel):
    """Every error answer: what went wrong, for a human."""

    detail: str


class ParamError(BaseModel):
    """One invalid parameter: where (``["query", "limit"]``) and why."""

    loc: list[str | int]
    msg: str


class BadRequest(Problem):
    """A 400: a query to fix (with its position), a cursor that does not belong to this
    search, or invalid parameters (with each one's error)."""

    position: int = omittable("0-based offset in `q` of the text to fix (query errors).")
    errors: list[ParamError] = omittable("Each invalid parameter (parameter errors).")


RETRY_AFTER = {
    "Retry-After": {
        "description": "Seconds to wait before retrying.",
        "schema": {"type": "integer"},
    }
}
ERRORS: dict[int, dict[str, Any]] = {
    400: {
        "model": BadRequest,
        "description": "A query to fix (`position` says where), a cursor that is not this "
        "search's, or invalid parameters (`errors`; never a 422).",
    },
    401: {
        "model": Problem,
        "description": "No bearer token, or one no grant knows.",
        "headers": {"WWW-Authenticate": {"description": "`Bearer`", "schema": {"type": "string"}}},
    },
    403: {
        "model": Problem,
        "description": "The token may not read this mailbox (the same answer whether the mailbox "
        "exists or not).",
    },
    404: {"model": Problem, "description": "No such message in this mailbox."},
    413: {"model": Problem, "description": "`q` is longer than the API reads."},
    429: {
        "model": Problem,
        "description": "This caller already runs its share of expensive searches (many prefixes "
        "or words; `SIDECAR_API_EXPENSIVE_PER_TOKEN`): retry when one has answered.",
        "headers": RETRY_AFTER,
    },
    500: {"model": Problem, "description": "An internal error (logged; `detail` says no more)."},
    503: {
        "model": Problem,
        "description": "An engine (`opensearch`, `qdrant`, `dynamodb`, named in `detail`) or the "
        "JWKS did not answer, or refused the sidecar's credentials: retry later.",
        "headers": RETRY_AFTER,
    },
}


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The ``responses=`` of a route: each error status it answers, with its body's model."""
    return {status: ERRORS[status] for status in statuses}
