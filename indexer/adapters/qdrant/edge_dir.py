"""The embedded store's directory: one owner process (a ``flock`` taken before any shard is
opened), ``edge.json`` (what wrote it), ``collections/<name>/`` (one Edge shard each) and
``aliases.json`` (alias → collection, replaced atomically). See :mod:`.edge` for why the lock
comes first."""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import IO

EDGE_VERSION = "0.9.0"
_NAME_OK = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.")


class StoreBusyError(RuntimeError):
    """The embedded store admits one owner process, and another one has it."""


class LegacyStoreError(RuntimeError):
    """The directory holds a store of qdrant-client's old local mode, which Edge cannot read."""


def busy_message(path: Path) -> str:
    return (
        f"the embedded Qdrant store {path} is owned by another process "
        "(a running `sidecar serve` or vectors worker?); stop it, or use SIDECAR_QDRANT_URL"
    )


def legacy_message(path: Path) -> str:
    return (
        f"{path} is an old embedded store (qdrant-client local mode), which the Edge engine "
        "cannot read: move it aside and rebuild the vectors from the table (README: "
        '"Moving an old embedded vector store")'
    )




class EdgeDirectory:
    """The files of one store: its lock, its collections' directories and its aliases."""

    def __init__(self, root: Path) -> None:
        self.root = root
        if (root / "meta.json").is_file() or (root / "collection").is_dir():
            raise LegacyStoreError(legacy_message(root))
        root.mkdir(parents=True, exist_ok=True)
        self._lock_file: IO[bytes] | None = self._take_lock(root)
        (root / "collections").mkdir(exist_ok=True)
        marker = root / "edge.json"
        if not marker.is_file():
            marker.write_text(json.dumps({"engine": "qdrant-edge", "version": EDGE_VERSION}))
        self.aliases: dict[str, str] = self._read_aliases()

    @staticmethod
    def _take_lock(root: Path) -> IO[bytes]:
        handle = (root / ".lock").open("ab")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            raise StoreBusyError(busy_message(root)) from None
        return handle

    @property
    def owned(self) -> bool:
        """This process still holds the lock (not closed)."""
        return self._lock_file is not None

    def release(self) -> None:
        """Give the store up (the flock goes with the file)."""
        if self._lock_file is not None:
            self._lock_file.close()
            self._lock_file = None

    def path(self, collection: str) -> Path:
        if not collection or not set(collection) <= _NAME_OK or collection.startswith("."):
            raise ValueError(f"not a collection name: {collection!r}")
        return self.root / "collections" / collection

    def collections(self) -> set[str]:
        return {p.name for p in (self.root / "collections").iterdir() if p.is_dir()}

    def resolve(self, name: str) -> str:
        return self.aliases.get(name, name)

    def set_aliases(self, changes: Mapping[str, str | None]) -> None:
        new = dict(self.aliases)
        for alias, collection in changes.items():
            if collection is None:
                new.pop(alias, None)
            elif collection not in self.collections():
                raise KeyError(f"no vector collection {collection!r} for alias {alias!r}")
            else:
                new[alias] = collection
        self.write_aliases(new)

    def _read_aliases(self) -> dict[str, str]:
        path = self.root / "aliases.json"
        return dict(json.loads(path.read_text())) if path.is_file() else {}

    def write_aliases(self, aliases: dict[str, str]) -> None:
        """Write a temporary file, fsync it, rename it over the old one: readers after a crash
        see the old map or the new one, never half of one."""
        path, tmp = self.root / "aliases.json", self.root / ".aliases.json.tmp"
        with tmp.open("w") as handle:
            json.dump(aliases, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
        self.aliases = aliases
