"""Is the live index older than the code? The readiness warning after an upgrade.

A release that ships a new mapping version (``MAPPING_VERSION``) starts writing with it only
after ``sidecar reindex`` has built the new index and moved the read alias
(docs/operations/upgrading.md); until then the API serves from the older index and whatever
the newer mapping adds is off (``has_analyzer`` style checks fall back). Nothing fails, which
is why it is easy to forget: this check turns it into a ``/readyz`` warning and the
``sidecar_index_mapping_version`` gauge (``target="live"`` against ``target="code"``), so an
operator or an alert sees it. A warning, never a failure: the older index answers every query.

The version comes from the index names the sidecar gives (``<alias>-v<N>``, one per mapping
version); an index of another name behind the alias (restored from a snapshot under a new
name, say) is reported as of unknown version instead of guessed.

``/readyz`` answers without authentication and discloses nothing, so what it shows is a fixed
sentence (:data:`MAPPING_CODES`); the line naming the alias, its indices and their versions
goes to the API's log, once per distinct state per process (a probe every few seconds must not
repeat it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from indexer.adapters.opensearch.family import MAPPING_VERSION, version_of
from indexer.adapters.opensearch.index import OpenSearchIndex
from indexer.metrics import INDEX_MAPPING_VERSION
from search_api.engine_errors import naming
from search_api.query.clauses import PREFIX_FIELDS_VERSION
from search_api.query.more_like_this import LIKED_BODY_ANALYZER

# How long the read index is taken to have (or lack) the liked-body analyzer: a reindex that
# adds it is used within this; a rollback to an index without it is read whole after it.
LIKED_ANALYZER_TTL_S = 10.0

T = TypeVar("T")

log = logging.getLogger(__name__)

# The fixed sentences /readyz shows under warnings (the detail is in the log).
MAPPING_CODES = {
    "behind": "the live index is on an older mapping version than this release's: what the "
              "newer one adds is off until `sidecar reindex` (versions: "
              "sidecar_index_mapping_version, and the API's log)",
    "unknown": "an index behind the read alias is not named <alias>-v<N>: its mapping version "
               "is unknown (details in the API's log)",
}
_logged: set[str] = set()  # the detail lines this process has logged already


@dataclass(frozen=True)
class MappingState:
    """The read alias's members and what their names say about their mapping versions."""

    alias: str
    code_version: int
    live: dict[str, int | None]  # index name -> its version (None: not a sidecar name)

    @property
    def oldest(self) -> int | None:
        """The lowest known version behind the alias (None: no index, or none named by us)."""
        known = [v for v in self.live.values() if v is not None]
        return min(known) if known else None

    def code(self) -> str | None:
        """The key of :data:`MAPPING_CODES` that applies, or None when all is current."""
        if any(v is None for v in self.live.values()):
            return "unknown"
        oldest = self.oldest
        return "behind" if oldest is not None and oldest < self.code_version else None

    def detail(self) -> str | None:
        """One line for the log, naming the alias, its indices and the versions."""
        unknown = sorted(name for name, v in self.live.items() if v is None)
        if unknown:
            return (f"the read alias {self.alias!r} holds {', '.join(unknown)}, whose mapping "
                    f"version is unknown (not named {self.alias}-v<N>); this code's is "
                    f"v{self.code_version}")
        oldest = self.oldest
        if oldest is not None and oldest < self.code_version:
            members = ", ".join(sorted(self.live))
            return (f"the read alias {self.alias!r} is on mapping v{oldest} ({members}); this "
                    f"code's is v{self.code_version}: what v{self.code_version} adds is off "
                    f"until `sidecar reindex` moves the alias (docs/operations/upgrading.md)")
        return None


def check(index: OpenSearchIndex, code: int = MAPPING_VERSION) -> MappingState:
    """Read the read alias's members (one cluster-state call) and set the gauge: ``code``
    always, ``live`` when a version is known. Engine errors propagate (readyz's own
    OpenSearch check reports the engine; the caller decides whether to look at all)."""
    members = index.aliases()[index.alias]
    state = MappingState(index.alias, code, {m: version_of(index.alias, m) for m in members})
    INDEX_MAPPING_VERSION.labels(target="code").set(code)
    if state.oldest is not None:
        INDEX_MAPPING_VERSION.labels(target="live").set(state.oldest)
    return state


def mapping_warning(index: OpenSearchIndex, code: int = MAPPING_VERSION) -> str | None:
    """What ``/readyz`` adds under ``warnings["mapping"]``: None when the live index is on the
    code's version (or there is no index yet, which readyz reports otherwise), else a fixed
    sentence of :data:`MAPPING_CODES`; the detail is logged once per distinct state."""
    state = check(index, code)
    key, detail = state.code(), state.detail()
    if key is None:
        return None
    if detail is not None and detail not in _logged:
        _logged.add(detail)
        log.warning("mapping check: %s", detail)
    return MAPPING_CODES[key]


class _Recent(Generic[T]):
    """A fact of the live mapping, asked of the cluster at most once per ``ttl_s`` (a reindex
    that changes it is seen within that) and kept between."""

    def __init__(self, ask: Callable[[], T], ttl_s: float) -> None:
        self._ask, self._ttl_s = ask, ttl_s
        self._known: tuple[float, T] | None = None

    def get(self) -> T:
        now = time.monotonic()
        known = self._known
        if known is not None and now - known[0] < self._ttl_s:
            return known[1]
        with naming("opensearch"):
            value = self._ask()
        self._known = (now, value)
        return value


class MappingFacts:
    """What the live mapping offers that a query may use (the liked-body analyzer, the
    phrase-prefix fields), asked of the cluster once per :data:`LIKED_ANALYZER_TTL_S` and
    cached here, not per request."""

    def __init__(self, index: Callable[[], OpenSearchIndex]) -> None:
        self._index = index
        self._liked = _Recent(self._ask_liked, LIKED_ANALYZER_TTL_S)
        self._prefixed = _Recent(self._ask_prefixed, LIKED_ANALYZER_TTL_S)

    def liked_body_analyzer(self) -> str | None:
        """The analyzer "similar" reads a liked body with, where every index behind the read
        alias defines it (mapping version 5 on), else None (the whole body, as before)."""
        return self._liked.get()

    def prefix_fields_indexed(self) -> bool:
        """Whether every index behind the read alias has mapping v6's prefix fields (named
        ``<alias>-v<N>``, N >= 6; no index yet: nothing to expand). An index of an unknown
        name is taken as lacking them."""
        return self._prefixed.get()

    def _ask_liked(self) -> str | None:
        return LIKED_BODY_ANALYZER if self._index().has_analyzer(LIKED_BODY_ANALYZER) else None

    def _ask_prefixed(self) -> bool:
        state = check(self._index())
        return all(v is not None and v >= PREFIX_FIELDS_VERSION for v in state.live.values())
