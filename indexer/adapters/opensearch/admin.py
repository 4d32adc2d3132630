"""The operations' face of the index family: templates, indices and aliases, refresh, counts,
scans and purge — what ``init``, ``reindex``, ``reconcile`` and ``purge`` call, and what the
writers' first batch calls when no index exists yet."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from opensearchpy.exceptions import NotFoundError, TransportError

from indexer.adapters.opensearch import serverless as aoss
from indexer.adapters.opensearch.errors import client_error, core_error, refusal
from indexer.adapters.opensearch.family import MAPPING_VERSION, IndexFamily, mapping_file


class IndexAdmin(IndexFamily):
    """Creates and changes the family; never searches a mailbox for a caller."""

    def put_template(self, version: int = MAPPING_VERSION) -> None:
        """The template of one mapping version, matching only that version's index name.

        One template per version (priority = version) so that a worker still running older code
        and a reindex to a newer version never fight over one shared template.
        """
        body = mapping_file(version)
        template = {
            "index_patterns": [self.index_name(version)],
            "priority": 100 + version,
            "version": body["version"],
            "template": self.flavour.template(self.client, body["template"]),
            "_meta": {"mapping_version": version, "owner": "mail-search-sidecar"},
        }
        self._call(
            self.client.indices.put_index_template,
            name=f"{self.alias}-messages-v{version}",
            body=template,
        )

    def create_index(self, version: int) -> str:
        """Create ``<alias>-v<version>`` from its template, in no alias (idempotent)."""
        self.put_template(version)
        name = self.index_name(version)
        if not self._call(self.client.indices.exists, index=name):
            try:
                self.client.indices.create(index=name)
            except TransportError as exc:
                refused = refusal(exc)
                if refused is not None:
                    raise refused from exc
                if "resource_already_exists" not in str(exc.error):
                    raise
        return name

    def ensure(self, version: int = MAPPING_VERSION) -> str:
        """Apply the template; on a fresh cluster create the index and point the alias at it.

        When the alias already exists nothing else is created: a reindex moves it, not start-up
        (a process running newer code must not leave an empty unaliased index behind).
        """
        self.put_template(version)
        current = self.aliases()[self.alias]
        if current:
            self.flavour.align(self._call, self.client, current)
            return current[0]
        name = self.create_index(version)
        self._call(
            self.client.indices.update_aliases,
            body={
                "actions": [{"add": {"index": name, "alias": self.alias, "is_write_index": True}}]
            },
        )
        return name

    def has_analyzer(self, name: str) -> bool:
        """Whether every index behind the read alias defines the analyzer ``name`` (what a newer
        mapping version adds, used only where the index has it). No index, or a cluster that
        does not serve ``_settings`` (a serverless collection may not): False."""
        try:
            found = self._call(self.client.indices.get_settings, index=self.alias,
                               name=f"index.analysis.analyzer.{name}.type")
        except TransportError as exc:  # a refusal, 404 (no index yet) included
            if client_error(exc):
                return False
            raise
        return bool(found) and all(member.get("settings") for member in found.values())

    def refresh(self, *indices: str) -> None:
        """Make every acknowledged write visible to searches (reconcile, purge, tests), in the
        read alias or in the named indices: a ``_refresh`` on a domain; on a collection, which
        has none, wait until a marker written now is searchable (the same guarantee)."""
        targets = list(indices) or (
            self.aliases()[self.alias] if self.serverless else [self.alias])
        self.flavour.refresh(self._call, self.client, targets)

    def update_aliases(self, actions: list[dict[str, Any]], *, missing_ok: bool = False) -> None:
        """One atomic ``_aliases`` request (every action applies, or none)."""
        extra: dict[str, Any] = {"ignore": [404]} if missing_ok else {}
        self._call(self.client.indices.update_aliases, body={"actions": actions}, **extra)

    def index_exists(self, name: str) -> bool:
        return bool(self._call(self.client.indices.exists, index=name))

    def delete_index(self, name: str) -> None:
        """Delete an index of the family; an absent one is no error."""
        self._call(self.client.indices.delete, index=name, ignore=[404])

    def scan_mailbox(self, mailbox_id: str, fields: Sequence[str]) -> Iterator[dict[str, Any]]:
        """``_source`` (these fields) of every document of a mailbox, in any order.

        Not routed: a document written under a wrong routing is found (and reported) too.
        A collection has no scroll: its pages are ``search_after`` ones.
        """
        try:
            for hit in self.flavour.scan(self._call, self.client, self.alias, mailbox_id,
                                         list(fields)):
                yield dict(hit["_source"])
        except NotFoundError:
            return
        except Exception as exc:
            core = core_error(exc, "opensearch scan")
            if core is not None:
                raise core from exc
            raise

    def mailbox_ids(self) -> set[str]:
        """Every mailbox with at least one document."""
        return set(self.mailbox_counts())

    def mailbox_counts(self, index: str | None = None) -> dict[str, int]:
        """Documents per mailbox in ``index`` (default: the alias); a paged composite agg.
        The visibility marker of a collection's ``refresh`` is no mailbox: left out."""
        found: dict[str, int] = {}
        after: dict[str, Any] | None = None
        while True:
            composite: dict[str, Any] = {
                "size": 1000,
                "sources": [{"m": {"terms": {"field": "mailbox_id"}}}],
            }
            if after:
                composite["after"] = after
            body = {"size": 0, "aggs": {"m": {"composite": composite}},
                    "query": {"bool": {"must_not": [aoss.marker_filter()]}}}
            try:
                agg = self._call(self.client.search, index=index or self.alias, body=body)
            except NotFoundError:
                return found
            buckets = agg["aggregations"]["m"]["buckets"]
            found.update({b["key"]["m"]: int(b["doc_count"]) for b in buckets})
            after = agg["aggregations"]["m"].get("after_key")
            if not buckets or after is None:
                return found

    def delete_mailbox(self, mailbox_id: str, rate: float = 0) -> int:
        """Delete every document of a mailbox from every index of the family, ``rate``
        documents per second (0 = unpaced); the count. A collection has no
        ``_delete_by_query``: search and bulk-delete until none is left."""
        return self.flavour.delete_mailbox(self._call, self.client, f"{self.alias}-v*",
                                           mailbox_id, rate)
