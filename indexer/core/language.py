"""Each message's language, detected at index time, and the fields that stem it in it.

Why: every text field is analyzed for English (``english_stemmer``), so a German mailbox
searching ``Rechnungen`` did not find ``Rechnung`` (issue 43). A message is now also indexed
with its own language's built-in OpenSearch analyzer (``german``, ``french``, ...), in a
field of that language (``subject_de``, ``clean_de``); a search asks those fields beside
today's, so a word's inflections match in their own language while English and everything
else match as before. Only the detected language's pair of fields is filled: an English
message, a CJK one (already searched as bigrams), or one whose language is unsure or has no
analyzer here gets none.

The detector is py3langid (BSD-3): a naive Bayes model over byte n-grams (97 languages),
chosen over pycld2 (no wheel for Python 3.14 or aarch64), lingua (a 96 MB wheel, 10×
slower) and langdetect (slower, one miss on the set;
docs/results/runs/2026-12-05-languages.md), shipped inside its wheel as a NumPy archive (no
pickle) and loaded once per process — never fetched. Loading takes ~0.6 s, streams the
model through a 68 MB temporary file (``/tmp``, writable in every deployment) and keeps ~74
MB resident per process that indexes. On the multilingual set of
``tests/data/multilingual`` it labels every message right, at 60–230 µs a message
(docs/quality.md). It reads the subject and the first :data:`HEAD_CHARS` characters of the
body (a long patch says no more about its language), and answers only above
:data:`MIN_CONFIDENCE` (a normalized probability): English mail with code in it is
sometimes guessed as another language, always below 0.3 on the linux-mips corpus, while
real prose of the set scores 0.88 or more.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

# ISO 639-1 code -> OpenSearch's built-in language analyzer. Each language costs every free
# word two more engine clauses (its subject and body fields), counted by the clause bound and
# the expensive-search gate: eight languages make a word 22 clauses instead of 6 (a 4-word
# query stays under the gate's 100). Another language is one more pair here and in a mapping.
ANALYZERS: dict[str, str] = {
    "de": "german",
    "fr": "french",
    "es": "spanish",
    "it": "italian",
    "pt": "portuguese",
    "nl": "dutch",
    "sv": "swedish",
    "ru": "russian",
}
LANGUAGE_FIELD = "lang"
HEAD_CHARS = 2000
MIN_CONFIDENCE = 0.5
UNKNOWN = "und"


def subject_field(code: str) -> str:
    return f"subject_{code}"


def body_field(code: str) -> str:
    return f"clean_{code}"


# Every field mapping v7 adds to a document (an older index is written without them).
V7_FIELDS = frozenset([LANGUAGE_FIELD, *(subject_field(c) for c in ANALYZERS),
                       *(body_field(c) for c in ANALYZERS)])


@lru_cache(maxsize=1)
def _identifier() -> Any:
    """The model, read from the installed package (a few hundred milliseconds, once)."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    return LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)


def detect(subject: str | None, body: str | None) -> str:
    """The message's language (ISO 639-1 where the model has it), or :data:`UNKNOWN` when
    there is no text or the model is unsure."""
    text = f"{subject or ''}\n{(body or '')[:HEAD_CHARS]}".strip()
    return _classified(text) if text else UNKNOWN


@lru_cache(maxsize=4096)
def _classified(text: str) -> str:
    """Kept for the batch's verify round, which builds each document again from a second
    read of the same message (one detection per message, not two)."""
    code, confidence = _identifier().classify(text)
    return str(code) if confidence >= MIN_CONFIDENCE else UNKNOWN


def language_fields(subject: str | None, body: str | None) -> dict[str, Any]:
    """``lang`` and, for a language with its own analyzer here, the subject and body again
    in that language's pair of fields."""
    code = detect(subject, body)
    fields: dict[str, Any] = {LANGUAGE_FIELD: code}
    if code in ANALYZERS:
        fields[subject_field(code)] = subject
        fields[body_field(code)] = body
    return fields


def for_version(doc: dict[str, Any], version: int) -> dict[str, Any]:
    """The document as an index of mapping ``version`` accepts it (a strict mapping older
    than v7 has no language fields: a reindex keeps the old index written for rollback)."""
    if version >= 7:
        return doc
    return {k: v for k, v in doc.items() if k not in V7_FIELDS}
