"""Where messages come from: an mbox file, a Maildir (``cur/`` + ``new/``), or a folder of .eml.

Each message is yielded as raw bytes with an *origin* that a report can name (``path`` for a
file, ``path#N`` for the N-th message of an mbox, counted from 1). The standard library's
:mod:`mailbox` reads mbox and Maildir (its mbox index is one scan of the file; bytes are read
one message at a time).
"""

from __future__ import annotations

import mailbox
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

_FROM_QUOTED = re.compile(rb"^>(>*From )", re.MULTILINE)


class UnknownSource(ValueError):
    """PATH is none of the supported kinds; the text says what was found."""


@dataclass(frozen=True, slots=True)
class Source:
    """One input: its kind, and how many messages (and files) it holds."""

    path: Path
    kind: str  # "mbox" | "maildir" | "eml"
    files: tuple[Path, ...]
    messages: int


def _is_maildir(path: Path) -> bool:
    return (path / "cur").is_dir() and (path / "new").is_dir()


def _maildir_files(path: Path) -> list[Path]:
    return sorted(f for sub in ("new", "cur") for f in (path / sub).iterdir() if f.is_file()
                  and not f.name.startswith("."))


def _looks_like_mbox(path: Path) -> bool:
    with path.open("rb") as f:
        return f.read(5) == b"From "


def open_source(path: Path) -> Source:
    """Classify PATH; raises :class:`UnknownSource` (or OSError when it cannot be read)."""
    path = Path(path)
    if path.is_dir():
        if _is_maildir(path):
            files = _maildir_files(path)
            return Source(path, "maildir", tuple(files), len(files))
        eml = sorted(p for p in path.rglob("*.eml") if p.is_file())
        if not eml:
            raise UnknownSource(
                f"{path} is a folder with neither cur/+new/ (Maildir) nor .eml files"
            )
        return Source(path, "eml", tuple(eml), len(eml))
    if not path.exists():
        raise UnknownSource(f"{path} does not exist")
    if _looks_like_mbox(path):
        count = len(mailbox.mbox(path, create=False))
        return Source(path, "mbox", (path,), count)
    return Source(path, "eml", (path,), 1)  # one message file (.eml or any name)


def messages(source: Source) -> Iterator[tuple[str, bytes | OSError]]:
    """(origin, raw bytes or the OSError reading it) for every message of ``source``."""
    if source.kind != "mbox":
        for file in source.files:
            try:
                yield str(file), file.read_bytes()
            except OSError as err:
                yield str(file), err
        return
    box = mailbox.mbox(source.path, create=False)
    for n, key in enumerate(box.iterkeys(), start=1):
        try:
            yield f"{source.path}#{n}", _unescaped(box.get_bytes(key, from_=False))
        except OSError as err:
            yield f"{source.path}#{n}", err


def _unescaped(raw: bytes) -> bytes:
    """Undo mbox "From " quoting (``>From `` → ``From ``, mboxrd), so a body line that began
    with "From" is not read as a quoted line."""
    return _FROM_QUOTED.sub(rb"\1", raw)
