"""The message index family behind one alias: its names, its mapping versions, and the one
way every face calls the client (errors classified at this door).

An alias names the family; ``<alias>-v<N>`` is the index of mapping version N, and
``<alias>-write`` the extra write targets while a reindex builds a new version (or keeps the
old one for rollback). The faces — :mod:`.admin` for ops, :mod:`.reads` for the API,
:mod:`.writes` for the workers — share this base and one client.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from importlib.resources import files
from typing import Any

from opensearchpy import OpenSearch
from opensearchpy.exceptions import NotFoundError

from indexer.adapters.opensearch.errors import core_error
from indexer.adapters.opensearch.flavour import Flavour, flavour_of

MAPPINGS = files("indexer") / "mappings"  # package data, read with importlib.resources
WRITE_ALIAS_SUFFIX = "-write"
MAPPING_VERSION = 7  # mappings/messages-v7.json (v6 + per-language fields); older kept for reindex


def version_of(alias: str, index: str) -> int | None:
    """The mapping version in a sidecar index name ``<alias>-v<N>``; None for other names."""
    found = re.fullmatch(rf"{re.escape(alias)}-v(\d+)", index)
    return int(found.group(1)) if found else None


@lru_cache(maxsize=8)
def mapping_file(version: int = MAPPING_VERSION) -> dict[str, Any]:
    """The versioned template body from ``mappings/`` (without its comment)."""
    raw = json.loads((MAPPINGS / f"messages-v{version}.json").read_text(encoding="utf-8"))
    raw.pop("_comment", None)
    return dict(raw)


class IndexFamily:
    """The alias, its indices' names and the flavour of the engine behind the client."""

    def __init__(self, client: OpenSearch, alias: str) -> None:
        self.client = client
        self.alias = alias
        self.flavour: Flavour = flavour_of(client)

    @property
    def serverless(self) -> bool:
        """The client talks to an OpenSearch Serverless collection."""
        return self.flavour.name == "serverless"

    def index_name(self, version: int = MAPPING_VERSION) -> str:
        return f"{self.alias}-v{version}"

    @property
    def write_alias(self) -> str:
        """Extra write targets: the index being built by a reindex, or the one kept for rollback.

        Searches read ``alias`` only; every write goes to the members of both aliases.
        """
        return f"{self.alias}{WRITE_ALIAS_SUFFIX}"

    def _call(self, method: Any, **kwargs: Any) -> Any:
        try:
            return method(**kwargs)
        except Exception as exc:
            core = core_error(exc, "opensearch")
            if core is not None:
                raise core from exc
            raise

    def aliases(self) -> dict[str, list[str]]:
        """Members of the read alias and of the write alias (one cluster-state read)."""
        try:
            found = self.client.indices.get_alias(name=f"{self.alias}*")
        except NotFoundError:
            found = {}
        except Exception as exc:
            core = core_error(exc, "opensearch")
            if core is not None:
                raise core from exc
            raise
        return {
            name: sorted(i for i, v in found.items() if name in v.get("aliases", {}))
            for name in (self.alias, self.write_alias)
        }
