"""HTTP routes: parse, authorise, call the search slice, render through the contract.

Each route declares its answer's model (:mod:`search_api.models`), every error status it
answers and a stable ``operationId`` (a generated client's method names): the OpenAPI
document is the API's contract, and a test generates a client from it."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response

from indexer.adapters.tables import MissingTableError
from search_api import contacts as contact_list
from search_api import limits, service
from search_api.auth import authorized_mailbox
from search_api.backends import Backends
from search_api.models import (
    RETRY_AFTER,
    ContactsPage,
    Health,
    Readiness,
    SearchPage,
    SimilarPage,
    errors,
)
from search_api.query import MAX_QUERY_LENGTH, parse

router = APIRouter()
_HEX64 = re.compile(r"[0-9a-f]{64}")


def backends(request: Request) -> Backends:
    found: Backends = request.app.state.backends
    return found


BackendsDep = Annotated[Backends, Depends(backends)]
Mailbox = Annotated[str, Depends(authorized_mailbox)]  # bearer token -> mailbox (auth.py)


@router.get("/healthz", response_model=Health, operation_id="healthz", tags=["health"])
def healthz() -> dict[str, str]:
    """Liveness: the process answers (nothing behind it is asked)."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=Readiness,
    response_model_exclude_unset=True,
    operation_id="readyz",
    tags=["health"],
    responses={
        503: {
            "model": Readiness,
            "description": "Some component does not answer (`failing`; `errors` says what an "
            "operator should fix, where known).",
            "headers": RETRY_AFTER,
        }
    },
)
def readyz(b: BackendsDep, response: Response) -> dict[str, Any]:
    """Readiness: every engine this replica uses answers, and the model has loaded."""
    checks: dict[str, Callable[[], object]] = {
        "opensearch": lambda: b.opensearch.ping(),
        "qdrant": lambda: b.vectors.store.collections(),
        "dynamodb": lambda: b.store.describe(),
    }
    if b.serves_vectors:  # the model loads in the background at start
        checks["model"] = lambda: b.model_loaded.is_set() or _raise("model still loading")
    skipped = [] if b.serves_vectors else ["qdrant"]  # a full-text replica (embedded store)
    for name in skipped:
        del checks[name]
    # Local: the module's imports are another change's; hoist when convenient.
    from indexer.core.errors import ConfigurationError

    failing, errors = [], {}
    for name, check in checks.items():
        try:
            check()
        except MissingTableError as exc:  # an operator's fix: say which table, which command
            failing.append(name)
            errors[name] = str(exc)
        except Exception as exc:
            failing.append(name)
            # Credentials refused (401/403; raised as is, or as the cause of "unavailable"):
            # say what to check, so the probe is not read as an outage that will pass.
            refused = exc if isinstance(exc, ConfigurationError) else exc.__cause__
            if isinstance(refused, ConfigurationError):
                errors[name] = f"credentials or permissions refused: {refused}"
    if failing:
        response.status_code = 503
        response.headers["Retry-After"] = "5"
    body: dict[str, Any] = {"ready": not failing, "failing": failing, "skipped": skipped}
    if errors:
        body["errors"] = errors
    return body


def _raise(reason: str) -> bool:
    raise RuntimeError(reason)


SEARCH_DESCRIPTION = """Full-text, semantic or hybrid (RRF) search of one mailbox.

`q` syntax (notmuch-like; operator names any case, `OR`/`AND` uppercase):

- `budget review`: all words must match, in subject or body (stemmed or exact words, or
  parts of identifiers and paths; in `hybrid` mode the full-text side needs any one of the
  free words, operators still apply exactly); `"release checklist"`: exact phrase.
- `a b OR c` is `a AND (b OR c)`: OR binds tighter than the implicit AND.
- `-draft`, `-from:bot@x.org`, `-(a OR b)`: negation; `( … )` groups.
- `from:keithp`, `from:keithp@keithp.com`, `from:keithp.com`, `from:Packard`: address, local
  part, domain or display-name word, any case, accents folded. `to:` matches To **or Cc** (as
  notmuch); `cc:` Cc only.
- `subject:cifs`, `subject:"local caching"`: subject word or phrase (`Re:`/`[tag]` prefixes
  still match but do not weigh on the ranking).
- `lib/message-file.c`, `fscache_release_page`: a word joined by punctuation is a phrase of
  its parts, also found inside longer identifiers and paths.
- `date:2024-03-01`, `date:2024-03-01..2024-03-31`, `after:2024-03-01`, `before:2024/03/31`:
  whole UTC days, both ends inclusive.
- `from:Mik*`, `subject:FreeB*`, `relea*`: prefix on any field.
- `thread:<thread_key>`: one thread; `has:attachment`: with attachments.

`collapse=thread` returns one hit per thread that has any matching message (`thread_hits`).
Examples: `from:alice@example.com budget`, `subject:"release plan" -draft`,
`(outage OR incident) date:2024-03-01..2024-03-31 has:attachment`,
`subject:BCM47XX Luxul OR Netgear`."""


@router.get(
    "/v1/mailboxes/{mailbox_id}/search",
    description=SEARCH_DESCRIPTION,
    response_model=SearchPage,
    response_model_exclude_unset=True,  # a field that does not apply is left out (models.py)
    operation_id="searchMailbox",
    tags=["search"],
    responses=errors(400, 401, 403, 413, 429, 500, 503),
)
def search(
    request: Request,
    mailbox: Mailbox,
    b: BackendsDep,
    q: Annotated[str, Query(min_length=1)],
    mode: Literal["fulltext", "semantic", "hybrid"] = "fulltext",
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    cursor: str | None = None,
    collapse: Literal["thread"] | None = None,
    sort: Literal["relevance", "date"] = "relevance",
) -> SearchPage:
    """Full-text, semantic or hybrid (RRF of both, full-text leg relaxed) search of one
    mailbox; see the syntax above."""
    if len(q) > MAX_QUERY_LENGTH:
        raise HTTPException(413, f"q is longer than {MAX_QUERY_LENGTH} characters")
    req = service.SearchRequest(q, parse(q), mode, limit, cursor, collapse, sort)
    caller = limits.caller_key(request.headers.get("authorization"))
    try:
        with b.expensive_gate.admit(caller, limits.is_expensive(req.node)):
            result = service.search(b, request.app.state.cursors, mailbox, req)
    except limits.TooManyExpensive as exc:
        raise HTTPException(429, str(exc), {"Retry-After": str(exc.retry_after_s)}) from exc
    request.state.results = len(result.hits)
    return result


@router.get(
    "/v1/mailboxes/{mailbox_id}/messages/{message_key}/similar",
    response_model=SimilarPage,
    response_model_exclude_unset=True,
    operation_id="similarMessages",
    tags=["search"],
    responses=errors(400, 401, 403, 404, 500, 503),
)
def similar(
    request: Request,
    mailbox: Mailbox,
    b: BackendsDep,
    message_key: str,
    limit: Annotated[int, Query(ge=1, le=100)] = 10,
    exclude_thread: bool = True,
) -> SimilarPage:
    """Messages most like this one, never itself, and by default never its own thread.

    The ranking fuses (RRF) the nearest stored vectors (not re-embedded) with
    OpenSearch *more like this* on subject and body and on the subject alone: on real
    mailing-list threads it ranks a message's thread-mates higher than *more like this* or
    the vectors alone (same-thread recall@10 in ``docs/quality.md``).
    """
    if not _HEX64.fullmatch(message_key):  # no key of this form: nothing to look up
        raise service.NotFound("no such message in this mailbox")
    page = service.similar_page(
        b, mailbox, message_key, limit=limit, exclude_thread=exclude_thread
    )
    request.state.results = len(page.hits)
    return page


@router.get(
    "/v1/mailboxes/{mailbox_id}/contacts",
    response_model=ContactsPage,
    operation_id="mailboxContacts",
    tags=["search"],
    responses=errors(400, 401, 403, 500, 503),
)
def contacts(
    request: Request,
    mailbox: Mailbox,
    b: BackendsDep,
    prefix: Annotated[
        str, Query(min_length=1, max_length=contact_list.MAX_PREFIX,
                   description="Start of an address, of its domain (or a domain label), or "
                   "of a display-name word; any case, accents folded.")
    ],
    limit: Annotated[int, Query(ge=1, le=50)] = 10,
) -> ContactsPage:
    """The mailbox's own correspondents (From, To and Cc of its messages, never Bcc) whose
    address, domain or name word starts with `prefix`, ranked by how often and how recently
    they appear: what to offer after `from:`, `to:` or `cc:`."""
    page = contact_list.contacts(b, mailbox, prefix, limit)
    request.state.results = len(page.contacts)
    return page
