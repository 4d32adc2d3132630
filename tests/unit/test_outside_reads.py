"""The suite reads nothing beside the repository (issue 37): a user's clone has no ``../shared``.

The guard is an audit hook (``tests/outside_guard.py``, armed by ``tests/conftest.py``); these tests prove it is armed and that it
leaves the repository, temporary files and installed packages alone."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from tests import conftest, outside_guard
from tests.outside_guard import REPO, OutsideRepositoryRead

needs_a_parent = pytest.mark.skipif(
    not outside_guard.ACTIVE,
    reason="the clone sits directly in the temp or home folder: nothing beside it to guard")


@needs_a_parent
def test_a_read_beside_the_repository_is_refused() -> None:
    beside = REPO.parent / "shared" / "corpora" / "stats.txt"
    before = len(outside_guard.OUTSIDE_READS)
    with pytest.raises(OutsideRepositoryRead, match="outside the repository"):
        beside.read_text(encoding="utf-8")
    assert outside_guard.OUTSIDE_READS[before:] == [str(beside)]
    del outside_guard.OUTSIDE_READS[before:]  # planted on purpose: not a failure of the session


@needs_a_parent
def test_relative_escapes_are_caught_too() -> None:
    assert outside_guard.outside_repository(str(REPO / ".." / "shared" / "x"))
    assert outside_guard.outside_repository(str(REPO.parent / (REPO.name + "-sibling") / "x"))


def test_the_repository_and_temp_files_are_allowed(tmp_path: Path) -> None:
    assert not outside_guard.outside_repository(str(REPO / "tests" / "data" / "corpora" / "x"))
    assert not outside_guard.outside_repository(str(REPO))
    (tmp_path / "ok.txt").write_text("ok", encoding="utf-8")
    assert (tmp_path / "ok.txt").read_text(encoding="utf-8") == "ok"
    assert not outside_guard.outside_repository(tempfile.gettempdir())


def test_the_shipped_corpora_are_in_the_repository() -> None:
    corpora = REPO / "tests" / "data" / "corpora"
    assert corpora == conftest.CORPORA
    for name in ("notmuch-lkml.jsonl.gz", "linux-mips-4k.jsonl.gz", "README.md"):
        assert (corpora / name).is_file(), name
