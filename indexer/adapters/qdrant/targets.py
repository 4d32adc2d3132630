"""Vector collections as write targets: the one searches read, and one being built or kept.

Like the full-text index (see :mod:`indexer.ops.reindex`), two Qdrant aliases describe the
state: ``<prefix>-vectors`` (searches) and ``<prefix>-vectors-write`` (the collection a
reindex is building, or the previous one kept for rollback). A collection's name says which
encoder filled it, ``<prefix>-<model>[-int8][-t<N>][-<recipe>]``: ``<model>`` is the slug of the
model (``SIDECAR_EMBED_MODEL``, or one of ``SIDECAR_EMBED_MODELS`` during a change of model),
``-int8`` its int8 graph (``SIDECAR_EMBED_PRECISION=int8``: the encoder's slug carries it, see
:func:`indexer.adapters.embedding.model_files.with_precision`; no suffix is float32, as every
collection
made before int8 existed);
no ``-t<N>`` means the configured truncation (``SIDECAR_EMBED_MAX_TOKENS``), ``-t<N>``
truncates at N tokens; ``<recipe>`` names the embedded text (:mod:`indexer.core.recipes`),
left out for ``forai`` — so the collections made before recipes existed, which embedded
``forai``, still say what they hold. Every vectors worker knows how to embed for each target
without any other shared state (:func:`collection_name` is the one naming rule,
:meth:`VectorTargets.encoder_of` reads it back). Each collection has its own embedding cache,
``<collection>-cache`` (vectors differ by encoder).

:class:`VectorTargets` owns that resolution for one
:class:`~indexer.adapters.qdrant.index.VectorIndex`
(the aliases, the names, the encoder a name stands for); the index itself stays one
collection's reads and writes.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple

from indexer.adapters.embedding.model_files import INT8_SUFFIX
from indexer.core.recipes import RECIPES, UNNAMED_RECIPE, Recipe, collection_name, recipe

if TYPE_CHECKING:
    from indexer.adapters.qdrant.index import VectorIndex

WRITE_SUFFIX = "-write"

_SUFFIXES = "|".join(re.escape(f"-{r}") for r in RECIPES if r != UNNAMED_RECIPE)
_TAIL = re.compile(rf"(?:-t(\d+))?({_SUFFIXES})?")


class Encoder(NamedTuple):
    """What a collection's name says of its vectors: model slug, tokens kept, embedded text."""

    slug: str
    tokens: int
    recipe: Recipe

    @property
    def precision(self) -> str:
        """int8 or float32: which graph of the model filled the collection. A worker embeds a
        target at this precision whatever its own SIDECAR_EMBED_PRECISION, so a collection
        never holds both (switching is a reindex to the other collection)."""
        return "int8" if self.slug.endswith(INT8_SUFFIX) else "float32"


@dataclass(frozen=True)
class VectorTargets:
    """The collections behind ``index``'s read and write aliases, and the encoder each one's
    name stands for. ``slugs``: the models this process can embed with (a name of another
    model is refused); ``tokens``: the configured truncation (a name without ``-t<N>``)."""

    index: VectorIndex
    slugs: tuple[str, ...] = ()
    tokens: int = 256

    @classmethod
    def of(cls, index: VectorIndex, slugs: Iterable[str] = (), tokens: int = 256) -> VectorTargets:
        return cls(index, tuple(slugs), tokens)

    @property
    def write_alias(self) -> str:
        return f"{self.index.alias}{WRITE_SUFFIX}"

    @property
    def _prefix(self) -> str:
        return self.index.alias.removesuffix("-vectors")

    def members(self) -> dict[str, str | None]:
        """The collection behind the read alias and behind the write alias (None: no alias)."""
        found = self.index.store.aliases()
        return {name: found.get(name) for name in (self.index.alias, self.write_alias)}

    def targets(self) -> list[str]:
        """Collections every vectors batch writes: read first, then the extra one (if any)."""
        return [c for c in self.members().values() if c is not None]

    def read_collection(self) -> str:
        """The collection searches read (the configured one before any alias exists)."""
        return self.members().get(self.index.alias) or self.index.collection

    def bound(self, collection: str) -> VectorIndex:
        """A view of the index that reads and writes one collection (and its cache) by name;
        it shares the store."""
        view = copy.copy(self.index)
        view.alias, view.collection, view.cache = collection, collection, f"{collection}-cache"
        return view

    def collection_for(
        self, max_tokens: int | None, model_slug: str | None = None, text: Recipe | None = None
    ) -> str:
        """The collection of an encoder (None: the configured truncation, model, recipe)."""
        slug = self.index.model_slug if model_slug is None else model_slug
        return collection_name(self._prefix, slug, max_tokens, text or self.index.recipe)

    def encoder_of(self, collection: str) -> Encoder:
        """The encoder of ``collection`` (see :func:`collection_name`)."""
        # each model at both precisions: a collection is embedded at the one its name says
        both = {s for slug in self.slugs
                for s in (slug.removesuffix(INT8_SUFFIX), f"{slug.removesuffix(INT8_SUFFIX)}"
                          f"{INT8_SUFFIX}")}
        for slug in sorted(both, key=len, reverse=True):
            base = f"{self._prefix}-{slug}"
            if not collection.startswith(base):
                continue
            found = _TAIL.fullmatch(collection, len(base))
            if found:
                tokens = int(found.group(1)) if found.group(1) else self.tokens
                text = recipe(found.group(2)[1:]) if found.group(2) else UNNAMED_RECIPE
                return Encoder(slug, tokens, text)
        raise ValueError(
            f"{collection} is not a collection of a known model: add the model to "
            "SIDECAR_EMBED_MODELS of this process"
        )

    def read_encoder(self) -> Encoder:
        """The encoder of the collection searches read."""
        return self.encoder_of(self.read_collection())

    def create(self, collection: str, dim: int | None = None) -> None:
        """The collection, its cache and payload indexes (idempotent); in no alias. ``dim``:
        the vector size of its model (None: the configured model's)."""
        view = self.bound(collection)
        view.dim = dim or self.index.dim
        view.create_collections()

    def drop(self, collection: str) -> None:
        """Delete a collection and its cache (missing ones are fine)."""
        for name in (collection, f"{collection}-cache"):
            self.index.store.drop(name)

    def exists(self, collection: str) -> bool:
        return collection in self.index.store.collections()

    def set_aliases(self, read: str | None, extra: str | None) -> None:
        """Point both aliases at once (atomic on a server; one file replace when embedded):
        the read alias at ``read``, the write alias at ``extra`` (None: remove it)."""
        self.index.store.set_aliases({self.index.alias: read, self.write_alias: extra})

    def point_counts(self, collection: str) -> dict[str, int]:
        """Points per mailbox in one collection (a payload scroll)."""
        counts: dict[str, int] = {}
        for page in self.index.store.scroll(collection, None, ["mailbox_id"]):
            for point in page:
                box = str(point.payload.get("mailbox_id"))
                counts[box] = counts.get(box, 0) + 1
        return counts

    def point_hashes(self, collection: str, mailbox_id: str) -> dict[str, str]:
        """``content_hash`` by message key of a mailbox's points (what a vector was made
        from)."""
        return {
            str(p["message_key"]): str(p.get("content_hash"))
            for page in self.bound(collection).scroll_mailbox(mailbox_id)
            for p in page
        }
