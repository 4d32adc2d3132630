"""Body text of an imported message: HTML to text, ``clean`` (no quotes, no signature), ``forAI``.

Why these rules: the shipped corpora were converted the same way (``shared/corpora/README.md``),
so imported mail is indexed and embedded like the mail every quality number was measured on.

* HTML-only messages are rendered with **inscriptis** (maintained, layout-aware: lists and
  tables keep their lines, scripts and styles are dropped); no hand-written tag stripping.
* ``clean`` drops quoted lines (``>``) and the attribution line that introduces them
  ("On … wrote:"), a top-posted quoted chain ("-----Original Message-----", Outlook's
  ``From:``/``Sent:`` block, "Le … a écrit :"), and the signature after the RFC 3676 delimiter
  ``-- ``. Reply headers are recognised with **mail-parser-reply**'s patterns (maintained, 15+
  languages). Its own "latest reply" cut is *not* used: it keeps only the text above the first
  attribution (mailing-list replies interleave answers between quotes, and those answers are the
  message) and it strips every line and treats a line starting with ``-`` as a signature, which
  would cut a patch at its first removed line.
* ``forAI`` is ``clean`` with whitespace normalised and inline image references replaced, bounded.
"""

from __future__ import annotations

import re
from functools import lru_cache

from inscriptis import get_text
from mailparser_reply.parser import EmailMessage

FORAI_MAX_CHARS = 8000
LANGUAGES = ("en", "de", "fr", "es", "it", "nl", "pl", "pt", "sv", "da", "fi", "cs", "ja", "zh")
_QUOTED = re.compile(r"^\s*>")
_WROTE = re.compile(r"(?:wrote|writes|said|a écrit|schrieb|escribió|scrisse|napisał)\s*:\s*$", re.I)
_FIELD = re.compile(r"^[\s*]*([^\W\d_][\w-]{0,20})[ *]*:", re.MULTILINE)
_FROM_WORDS = frozenset(
    {"from", "von", "de", "da", "van", "od", "från", "fra", "lähettäjä", "от", "feladó", "kimden"}
)
_SIGNATURE = re.compile(r"^-- ?$")  # RFC 3676 4.3: "-- " alone (some clients drop the space)
_IMAGE = re.compile(r"\[(?:cid|image):[^\]\n]{0,200}\]", re.IGNORECASE)
_BLANKS = re.compile(r"\n{3,}")
_SPACES = re.compile(r"[ \t\u00a0]+\n")


@lru_cache(maxsize=1)
def _reply_header() -> re.Pattern[str]:
    """mail-parser-reply's reply-header pattern ("On … wrote:", ``From:`` blocks, …)."""
    pattern: re.Pattern[str] = EmailMessage(text="", languages=list(LANGUAGES)).HEADER_REGEX
    return pattern


def html_to_text(html: str) -> str:
    """Readable text of an HTML body (inscriptis); blank lines collapsed."""
    return _BLANKS.sub("\n\n", get_text(html)).strip()


def _header_lines(lines: list[str]) -> dict[int, int]:
    """Start line → end line (exclusive) of every reply header block in ``lines``."""
    text = "\n".join(line.rstrip() for line in lines)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    found: dict[int, int] = {}
    for match in _reply_header().finditer(text):
        if not match.group().strip():
            continue
        first = _line_of(starts, match.start())
        found[first] = max(found.get(first, first), _line_of(starts, match.end() - 1) + 1)
    return found


def _line_of(starts: list[int], offset: int) -> int:
    lo, hi = 0, len(starts) - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if starts[mid] <= offset:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _next_content(lines: list[str], start: int) -> int:
    """Index of the first non-blank line at or after ``start`` (``len(lines)`` if none)."""
    while start < len(lines) and not lines[start].strip():
        start += 1
    return start


def _is_chain(block: list[str]) -> bool:
    """A header block that starts older mail: a separator line, or a "From:" among ≥ 2 fields.

    A patch's trailer (``Cc:``, ``Signed-off-by:``, ``Patchwork:`` lines) also looks like a
    header block to the pattern; it must not cut the patch.
    """
    text = "\n".join(block)
    names = [m.lower() for m in _FIELD.findall(text)]
    if not names:
        return True  # "-----Original Message-----", "On … wrote:" without quotes below
    return len(set(names)) >= 2 and names[0] in _FROM_WORDS and not any(
        n.endswith("-by") for n in names
    )


def clean_text(text: str) -> tuple[str, bool]:
    """(``clean``, fallback): ``text`` without quotes, reply headers, top-posted chain, signature.

    ``fallback`` is True when nothing would be left, and ``clean`` is then ``text`` itself
    (AECS-1 ``processing.cleanFallback``).
    """
    lines = text.replace("\r\n", "\n").split("\n")
    headers = _header_lines(lines)
    kept: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if _SIGNATURE.match(line):
            break
        if i not in headers and _WROTE.search(line):
            headers[i] = i + 1  # "Ann <a@x.org> wrote:" (a bare attribution, if quotes follow)
        if i in headers:
            after = _next_content(lines, headers[i])
            if after >= len(lines) or _QUOTED.match(lines[after]):
                i = headers[i]  # an attribution: its quoted block is dropped line by line
                continue
            if not _QUOTED.match(line) and _is_chain(lines[i : headers[i]]):
                break  # a top-posted quoted chain: everything below it is older mail
        if not _QUOTED.match(line):
            kept.append(line)
        i += 1
    clean = _BLANKS.sub("\n\n", "\n".join(kept)).strip()
    return (clean, False) if clean else (text.strip(), True)


def for_ai(clean: str, max_chars: int = FORAI_MAX_CHARS) -> str:
    """``clean`` for a model: image references replaced, whitespace normalised, bounded.

    Cut at the last whitespace before ``max_chars`` (when there is one in the last tenth) so the
    bound never splits a word.
    """
    text = _IMAGE.sub("[image]", clean.replace("\r\n", "\n"))
    text = _BLANKS.sub("\n\n", _SPACES.sub("\n", text)).strip()
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars]
    space = max(cut.rfind(" "), cut.rfind("\n"))
    return cut[:space].rstrip() if space > max_chars * 9 // 10 else cut
