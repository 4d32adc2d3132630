"""HTTP routes: parse, authorise, call the search slice, render through the contract.

Each route declares its answer's model (:mod:`search_api.models`), every error status it
answers and a stable ``operationId`` (a generated client's method names): the OpenAPI
document is the API's contract, and a test generates a client from it."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query, Request, Response
from fastapi.security import HTTPAuthorizationCredentials

from indexer.adapters.dynamodb.tables import MissingTableError
from indexer.metrics import API_COMPONENT_READY as COMPONENT_READY
from search_api import contacts as contact_list
from search_api import limits, service
from search_api.auth import authorized_mailbox, bearer
from search_api.backends import Backends
from search_api.mapping_check import mapping_warning
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
from search_api.query.clauses import in_languages

log = logging.getLogger(__name__)
router = APIRouter()
_HEX64 = re.compile(r"[0-9a-f]{64}")


def backends(request: Request) -> Backends:
    found: Backends = request.app.state.backends
    return found


BackendsDep = Annotated[Backends, Depends(backends)]


def admitted_mailbox(
    request: Request,
    mailbox: Annotated[str, Depends(authorized_mailbox)],
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer)],
    b: BackendsDep,
) -> str:
    """The mailbox a bearer token may read (auth.py: 401, 403), once the caller's request rate
    admits one more (429 before any engine is asked); the caller's principal is kept on the
    request for the expensive-search gate (:mod:`search_api.limits`)."""
    principal = limits.principal_key(credentials.credentials if credentials else "")
    request.state.principal = principal
    try:
        b.gates.rate.admit(principal)
    except limits.TooManyExpensive as exc:
        raise HTTPException(429, str(exc), {"Retry-After": str(exc.retry_after_s)}) from exc
    return mailbox


Mailbox = Annotated[str, Depends(admitted_mailbox)]  # bearer token -> mailbox, rate admitted


@contextmanager
def gated(request: Request, b: Backends, expensive: bool, *, rated: bool = True
          ) -> Iterator[None]:
    """The body under the expensive-search gate, its refusal a 429 with Retry-After."""
    try:
        with b.gates.expensive.admit(request.state.principal, expensive, rated=rated):
            yield
    except limits.TooManyExpensive as exc:
        raise HTTPException(429, str(exc), {"Retry-After": str(exc.retry_after_s)}) from exc


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
    """Readiness: which kinds of search this replica can serve (``serving``; 503 when none),
    and whether every engine it uses answers and the model has loaded (``ready``).

    Served on the public port without authentication, so it discloses nothing: each failing
    component gets a fixed code (:data:`READY_CODES`); what exactly failed — the engine's
    refusal, with the account, role and resource it names, a table's name — is logged (and
    ``sidecar_api_component_ready`` on the metrics port says which component)."""
    checks: dict[str, Callable[[], object]] = {
        "opensearch": lambda: b.opensearch.ping(),
        "qdrant": lambda: b.vectors.store.collections(),
        "dynamodb": lambda: b.store.describe(),
    }
    if b.serves_vectors:  # the model loads in the background at start
        checks["model"] = lambda: b.encoder.model_loaded.is_set() or _raise("model still loading")
    skipped = [] if b.serves_vectors else ["qdrant"]  # a full-text replica (embedded store)
    for name in skipped:
        del checks[name]
    failing, errors = [], {}
    for name, check in checks.items():
        try:
            check()
        except Exception as exc:
            failing.append(name)
            errors[name] = ready_code(name, exc)
            log.warning("readyz: %s failing (%s): %s", name, errors[name], exc)
        COMPONENT_READY.labels(component=name).set(0 if name in errors else 1)
    serving = [mode for mode, needs in MODE_NEEDS.items()
               if all(n not in failing and (n in checks or n == "model") for n in needs)
               and (mode == "fulltext" or b.serves_vectors)]
    if not serving:
        response.status_code = 503
        response.headers["Retry-After"] = "5"
    body: dict[str, Any] = {"ready": not failing, "failing": failing, "skipped": skipped,
                            "serving": serving}
    if errors:
        body["errors"] = errors
    warning = _mapping_warning(b) if "opensearch" not in failing else None
    if warning:
        body["warnings"] = {"mapping": warning}
    return body


def _mapping_warning(b: Backends) -> str | None:
    """The live index older than this release's mapping (a fixed sentence; the detail is
    logged): a warning, never a failure, since the older index answers every query."""
    try:
        return mapping_warning(b.opensearch)  # also sets sidecar_index_mapping_version
    except Exception as exc:  # the engine's own check above reports the engine
        log.info("readyz: mapping version not read: %s", type(exc).__name__)
        return None


# What each kind of search needs (every hit is joined to its row in the table). /readyz
# answers 503 only when no kind can be served: a load balancer or a Kubernetes readiness probe
# then takes this replica out, and keeps it while one engine is down and another still
# answers (an OpenSearch outage leaves semantic search; ECS and a target group of pods would
# otherwise drain every replica at once). `ready` is whether everything answers.
MODE_NEEDS: dict[str, tuple[str, ...]] = {
    "fulltext": ("opensearch", "dynamodb"),
    "semantic": ("qdrant", "model", "dynamodb"),
}


# The fixed codes /readyz shows for a failing component (the detail is in the log).
READY_CODES = {
    "missing_table": "a table is missing: run `sidecar init` (its name is in the API's log)",
    "credentials_refused": "the engine refused our credentials or permissions (details in "
                           "the API's log)",
    "model_loading": "the embedding model is still loading",
    "unavailable": "the engine did not answer (details in the API's log)",
}


def ready_code(name: str, exc: BaseException) -> str:
    """The fixed sentence of :data:`READY_CODES` for a failed check, no text of ``exc``:
    an engine's refusal names the account, role and resource that asked."""
    from indexer.core.errors import ConfigurationError  # local: the error family's leaf

    if isinstance(exc, MissingTableError):
        return READY_CODES["missing_table"]
    refused = exc if isinstance(exc, ConfigurationError) else exc.__cause__
    if isinstance(refused, ConfigurationError):
        return READY_CODES["credentials_refused"]
    if name == "model":
        return READY_CODES["model_loading"]
    return READY_CODES["unavailable"]


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
    mode: service.Mode = "fulltext",
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
    # words ask the language fields of the mailbox's own languages only (mapping v7)
    with in_languages(b.languages.of(mailbox)):
        expensive = limits.is_expensive(req.node, collapse=collapse == "thread", limit=limit)
        with gated(request, b, expensive):
            result = service.search(b, request.app.state.cursors, mailbox, req)
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
    with gated(request, b, expensive=True, rated=False):  # three queries of 25 terms each
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
