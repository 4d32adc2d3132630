"""The embedded text of a message: which of its fields the vector is made from (its *recipe*).

Pure functions over plain strings. A recipe is named in the collection that holds its vectors
(:func:`indexer.adapters.qdrant.targets.collection_for`), so every worker knows from a target's
name which text to embed, and changing the recipe is a ``sidecar reindex --vectors``.

- ``forai``: the message's ``forai`` text alone (the only text embedded before recipes).
- ``subject-forai`` (default): the subject with its reply/forward/list/patch prefixes stripped,
  a blank line, then ``forai`` — measured in ``docs/quality.md``: a reply such as "Applied,
  thanks" keeps what its thread is about.

Either way a message with a blank ``forai`` has no embedded text (hence no point).
"""

from __future__ import annotations

import re
from typing import Literal, get_args

Recipe = Literal["forai", "subject-forai"]
RECIPES: tuple[Recipe, ...] = get_args(Recipe)
DEFAULT_RECIPE: Recipe = "subject-forai"

# The prefixes the v2+ OpenSearch mapping strips from the scored subject (its
# ``subject_prefix`` char filter holds the same pattern; a unit test keeps them equal):
# ``Re:``, ``Fwd:``, ``AW:``, ``SV:``, ``Antw:``, ``WG:`` (also ``Re[2]:``) and any ``[...]``
# tag such as ``[notmuch]`` or ``[PATCH v2 3/5]``, repeated.
SUBJECT_PREFIX = r"^(?:\s*(?:(?i:re|fwd?|aw|sv|antw|wg)\s*(?:\[\d+\])?\s*:|\[[^\]]*\]))+"
_PREFIX = re.compile(SUBJECT_PREFIX)


def recipe(name: str) -> Recipe:
    """``name`` as a recipe, or a ValueError naming the known ones."""
    for known in RECIPES:
        if name == known:
            return known
    raise ValueError(f"unknown embedding recipe {name!r}: choose one of {', '.join(RECIPES)}")


def strip_subject(subject: str) -> str:
    """The subject without its leading prefixes and surrounding blanks ("" if nothing else)."""
    return _PREFIX.sub("", subject, count=1).strip()


def embedded_text(name: Recipe, subject: str | None, forai: str | None) -> str | None:
    """The text the vector of a message is made from, or None (no point: blank ``forai``)."""
    if forai is None or not forai.strip():
        return None
    topic = strip_subject(subject) if name == "subject-forai" and subject else ""
    return f"{topic}\n\n{forai}" if topic else forai


# The recipe a collection name without a recipe suffix embedded (collections made
# before recipes were named carry none).
UNNAMED_RECIPE: Recipe = "forai"


def collection_name(prefix: str, model_slug: str, max_tokens: int | None, text: Recipe) -> str:
    """``<prefix>-<model slug>[-t<max_tokens>][-<recipe>]`` (the recipe left out for
    ``forai``): the one naming rule of vector collections."""
    tokens = "" if max_tokens is None else f"-t{max_tokens}"
    suffix = "" if text == UNNAMED_RECIPE else f"-{text}"
    return f"{prefix}-{model_slug}{tokens}{suffix}"
