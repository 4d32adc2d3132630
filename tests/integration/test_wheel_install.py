"""Acceptance (issue 13): the runtime wheel installs into a fresh virtual environment with its
locked dependencies and works there — `sidecar --version` and the service commands' help, and
a worker started from that install indexes a message of the real local stack.

The environment reuses uv's cache (no download once the lock's wheels are cached) and holds
the runtime only: no tooling, no moto. The message is written and its stream exported by this
test (playing the user's writer); everything the sidecar does runs from the installed wheel.
"""

from __future__ import annotations

import email.parser
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from indexer.adapters.aws import clients as aws
from indexer.settings import Settings, to_env
from tests.support.ops_helpers import SAMPLE
from tests.support.pipeline_helpers import (
    export_stream,
    opensearch_docs,
    prepare_tables,
    table_messages,
)

pytestmark = [pytest.mark.stack, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
UV = Path(sys.executable).with_name("uv")
TOOLING = ("sidecar_tools/", "moto/")
BOX = "demo@example.com"


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None,
         timeout: float = 600) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout, check=False)
    assert done.returncode == 0, f"{args} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run(UV, "build", "--wheel", "--package", "mail-search-sidecar", "--out-dir", out, cwd=ROOT)
    (built,) = out.glob("mail_search_sidecar-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv: the locked runtime dependencies (hashes checked), then the wheel."""
    home = tmp_path_factory.mktemp("venv")
    env_dir = home / "env"
    _run(UV, "venv", "--python", sys.executable, env_dir, cwd=home)
    requirements = home / "requirements.txt"
    # The production install (docs/getting-started/index.md): the runtime with the ONNX encoder, no torch.
    _run(UV, "export", "--frozen", "--no-dev", "--package", "mail-search-sidecar",
         "--extra", "vectors", "--no-emit-project", "--no-emit-workspace",
         "--output-file", requirements, cwd=ROOT)
    python = env_dir / "bin" / "python"
    _run(UV, "pip", "install", "--python", python, "--require-hashes", "-r", requirements,
         cwd=home, timeout=1200)
    _run(UV, "pip", "install", "--python", python, "--no-deps", wheel, cwd=home)
    return env_dir


def test_the_wheel_holds_the_runtime_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        metadata = email.parser.Parser().parsestr(
            archive.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode())
        licenses = {n.rsplit("/", 1)[-1]: archive.read(n)
                    for n in names if ".dist-info/licenses/" in n}
    assert not [n for n in names if n.startswith(TOOLING)]
    assert not [n for n in names if n.split("/")[0] in {"tests", "tools", "eval", "bench"}]
    assert "indexer/mappings/messages-v2.json" in names  # package data
    requires = metadata.get_all("Requires-Dist") or []
    assert not [r for r in requires if r.lower().startswith("moto")]
    # the tooling is only an extra (`mail-search-sidecar[local]`), never a runtime dependency
    assert all("extra ==" in r for r in requires if "tools" in r)
    # issue 24 part 4: licensed in the metadata (PEP 639), with the files a review reads
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata.get_all("License-File") == ["LICENSE", "NOTICE"]
    assert licenses == {name: (ROOT / name).read_bytes() for name in ("LICENSE", "NOTICE")}


def test_installed_commands_work(installed: Path) -> None:
    sidecar = installed / "bin" / "sidecar"
    version = _run(sidecar, "--version", cwd=installed)
    import importlib.metadata

    assert version.strip() == f"sidecar {importlib.metadata.version('mail-search-sidecar')}"
    for command in ("worker", "serve", "tail", "ingest", "backfill"):
        assert "Usage" in _run(sidecar, command, "--help", cwd=installed)
    helptext = _run(sidecar, "--help", cwd=installed)
    assert " stack " not in helptext and " bench " not in helptext  # tooling not installed
    probe = subprocess.run([installed / "bin" / "python", "-c", "import sidecar_tools"],
                           capture_output=True, cwd=installed, check=False)
    assert probe.returncode != 0


def test_a_worker_from_the_installed_wheel_indexes_a_message(
    installed: Path, settings: Settings, tmp_path: Path
) -> None:
    from sidecar_tools.writer.files import load_file

    prepare_tables(settings)
    load_file(aws.client(settings, "dynamodb"), settings.table, SAMPLE, BOX)
    records = tmp_path / "records.jsonl"
    assert export_stream(settings, records) > 0
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("SIDECAR_")},
           **to_env(settings), "HF_HUB_OFFLINE": "1", "PYTHONPATH": ""}
    sidecar = str(installed / "bin" / "sidecar")
    # The encoder's graph is made where torch is (the image's build stage; here the dev
    # environment), as docs/encoder.md says: `sidecar export-onnx`.
    _run(ROOT / ".venv" / "bin" / "sidecar", "export-onnx", cwd=tmp_path, env=env, timeout=600)
    # both roles: `ingest --wait` waits for the full-text and the vectors tasks
    worker = subprocess.Popen([sidecar, "worker"], cwd=tmp_path, env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        _run(sidecar, "ingest", records, "--wait", "--timeout", "600", cwd=tmp_path, env=env,
             timeout=700)
        table = table_messages(aws.client(settings, "dynamodb"), settings.table, BOX)
        assert table
        assert set(opensearch_docs(settings, BOX)) == set(table)
    finally:
        worker.terminate()
        try:
            worker.wait(30)
        except subprocess.TimeoutExpired:
            worker.kill()
