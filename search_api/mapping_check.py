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
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from indexer.adapters.opensearch import MAPPING_VERSION, OpenSearchIndex
from indexer.metrics import INDEX_MAPPING_VERSION


@dataclass(frozen=True)
class MappingState:
    """The read alias's members and what their names say about their mapping versions."""

    alias: str
    code: int
    live: dict[str, int | None]  # index name -> its version (None: not a sidecar name)

    @property
    def oldest(self) -> int | None:
        """The lowest known version behind the alias (None: no index, or none named by us)."""
        known = [v for v in self.live.values() if v is not None]
        return min(known) if known else None

    def warning(self) -> str | None:
        """One line for an operator when the alias is behind the code (or cannot be told)."""
        unknown = sorted(name for name, v in self.live.items() if v is None)
        if unknown:
            return (f"the read alias {self.alias!r} holds {', '.join(unknown)}, whose mapping "
                    f"version is unknown (not named {self.alias}-v<N>); this code's is "
                    f"v{self.code}")
        oldest = self.oldest
        if oldest is not None and oldest < self.code:
            members = ", ".join(sorted(self.live))
            return (f"the read alias {self.alias!r} is on mapping v{oldest} ({members}); this "
                    f"code's is v{self.code}: what v{self.code} adds is off until `sidecar "
                    f"reindex` moves the alias (docs/operations/upgrading.md)")
        return None


def version_of(alias: str, index: str) -> int | None:
    """The mapping version in a sidecar index name ``<alias>-v<N>``; None for other names."""
    found = re.fullmatch(rf"{re.escape(alias)}-v(\d+)", index)
    return int(found.group(1)) if found else None


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
    """What ``/readyz`` adds under ``warnings``: None when the live index is the code's
    version (or there is no index yet, which readyz reports otherwise), else one line."""
    return check(index, code).warning()
