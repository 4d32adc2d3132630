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
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
_BESIDE = str(REPO.parent) + os.sep
_INSIDE = str(REPO) + os.sep
OUTSIDE_READS: list[str] = []


def _shared_roots() -> list[str]:
    """Folders every process may read whatever sits beside the clone: the temp folder, the
    home folder (caches), the Python installation."""
    roots = {tempfile.gettempdir(), str(Path.home()), sys.prefix, sys.base_prefix}
    return sorted(os.path.realpath(r) + os.sep for r in roots)


# Those of them inside the clone's parent folder (a home at /work/home beside /work/main) are
# read freely; one above it (the temp folder of a clone in /tmp/ci/main) changes nothing.
_ALLOWED = [root for root in _shared_roots() if root.startswith(_BESIDE)]
# Where the clone's parent is itself one of those folders (a clone in /tmp or in the home
# folder) or the root, what lies beside the clone is the machine's: nothing to check.
ACTIVE = REPO.parent != Path(REPO.anchor) and _BESIDE not in _shared_roots()


class OutsideRepositoryRead(RuntimeError):
    """A test opened a file beside the repository, which a user's clone does not have."""


def outside_repository(path: str) -> bool:
    """Whether ``path`` lies beside the repository (under its parent, not inside it, and not
    in the temp, home or Python folders)."""
    if not ACTIVE:
        return False
    full = os.path.abspath(path)
    if not full.startswith(_BESIDE) or (full + os.sep).startswith(_INSIDE):
        return False
    return not any((full + os.sep).startswith(root) for root in _ALLOWED)


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
