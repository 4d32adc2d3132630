"""Nothing outside the repository is read by a test (issue 37).

A user's clone has nothing beside it (no ``../shared``, no sibling checkout), so a test that
opens a file next to the repository passes on our machines and fails on theirs. Every ``open``
of the pytest process is checked by an audit hook: one under the repository's parent folder but
outside the repository raises at once and fails the session. The optional Qdrant server binary
is run, never opened, and is named by ``SIDECAR_QDRANT_BIN``; subprocesses are covered by CI,
which runs the suite with ``../shared`` hidden (``.ci/run``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
_BESIDE = str(REPO.parent) + os.sep
_INSIDE = str(REPO) + os.sep
OUTSIDE_READS: list[str] = []


class OutsideRepositoryRead(RuntimeError):
    """A test opened a file beside the repository, which a user's clone does not have."""


def outside_repository(path: str) -> bool:
    """Whether ``path`` lies beside the repository (under its parent, not inside it)."""
    full = os.path.abspath(path)
    return full.startswith(_BESIDE) and not (full + os.sep).startswith(_INSIDE)


def _audit_open(event: str, args: tuple[Any, ...]) -> None:
    if event != "open" or not args or not isinstance(args[0], (str, os.PathLike)):
        return
    path = os.fspath(args[0])
    if isinstance(path, str) and outside_repository(path):
        OUTSIDE_READS.append(path)
        raise OutsideRepositoryRead(
            f"{path}: a test read a file outside the repository ({REPO}); ship what it needs "
            "under tests/data/ (see tests/data/corpora/README.md)")


def install_outside_guard() -> None:
    """Arm the hook once per process (audit hooks cannot be removed)."""
    if not getattr(sys, "_sidecar_outside_guard", False):
        sys.addaudithook(_audit_open)
        sys._sidecar_outside_guard = True  # type: ignore[attr-defined]
