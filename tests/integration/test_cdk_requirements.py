"""The CDK app deploys from its own small environment (issue 40 item 7): ``deploy/cdk/
requirements.txt`` holds what ``cdk synth`` needs, so an adopter deploying it installs the CDK
libraries only — not ``make venv``'s ~3 GB (torch) nor the sidecar itself.

Why each check:
- its pins are uv.lock's versions, so the environment the suite tests the app in (the dev
  group) and the one adopters build never drift apart;
- every import of the app's Python files is the standard library, the app's own package or a
  distribution the file names: an ``import indexer`` slipped into the stack fails here at once;
- a fresh virtual environment built from the file alone (uv's cache: seconds) imports every
  module of the app, and has neither torch nor the sidecar in it (``cdk synth`` of both stacks
  from such an environment took ~50 s here when tried by hand; the suite's synth is
  test_deploy_cdk.py's).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CDK_DIR = ROOT / "deploy" / "cdk"
REQUIREMENTS = CDK_DIR / "requirements.txt"
# the import names of the distributions requirements.txt may hold
MODULES = {"aws-cdk-lib": "aws_cdk", "constructs": "constructs"}


def pins() -> dict[str, str]:
    found = {}
    for line in REQUIREMENTS.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{line}: not pinned"
            found[name.strip()] = version.strip()
    return found


def test_the_pins_are_the_locked_versions() -> None:
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    locked = {p["name"]: p["version"] for p in lock["package"]}
    assert set(pins()) == set(MODULES)
    for name, version in pins().items():
        assert locked[name] == version, (name, version, locked[name])


def test_the_app_imports_only_the_cdk_and_itself() -> None:
    allowed = {MODULES[name] for name in pins()} | {"sidecar_cdk"} | set(sys.stdlib_module_names)
    seen = set()
    for path in CDK_DIR.rglob("*.py"):
        if "cdk.out" in path.parts or ".venv" in path.parts:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = {node.module.split(".")[0]}
            else:
                continue
            seen |= roots
            assert roots <= allowed, f"{path.relative_to(ROOT)}: imports {roots - allowed}"
    assert {"aws_cdk", "constructs"} <= seen  # the scan read the app


def test_the_app_loads_from_the_requirements_alone(tmp_path: Path) -> None:
    """A fresh environment of requirements.txt only imports every module of the app (the
    scan above says nothing else is imported anywhere in it) and has neither torch nor the
    sidecar. The synth itself is test_deploy_cdk.py's (same app, the dev environment): a
    second synth here would double its ~50 s for no further proof."""
    uv = Path(sys.executable).with_name("uv")
    env_dir = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, env_dir], check=True,
                   capture_output=True, timeout=120)
    python = env_dir / "bin" / "python"
    installed = subprocess.run([uv, "pip", "install", "-q", "--python", python, "-r",
                                REQUIREMENTS], capture_output=True, text=True, timeout=600,
                               check=False)
    assert installed.returncode == 0, installed.stderr
    modules = sorted(f"sidecar_cdk.{p.stem}" for p in (CDK_DIR / "sidecar_cdk").glob("*.py")
                     if p.stem != "__init__")
    probe = ("import importlib, importlib.util as u\n"
             f"for m in {modules!r}: importlib.import_module(m)\n"
             "print([m for m in ('torch', 'indexer', 'search_api', 'boto3') if u.find_spec(m)])")
    done = subprocess.run([python, "-c", probe], cwd=CDK_DIR, capture_output=True, text=True,
                          timeout=300, check=False, env={**os.environ, "PYTHONPATH": ""})
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout
