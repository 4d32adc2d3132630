"""The CDK app deploys from its own small environment (issue 40 item 7): ``deploy/cdk/
requirements.txt`` holds what ``cdk synth`` needs, so an adopter deploying it installs the CDK
libraries only — not ``make venv``'s ~3 GB (torch) nor the sidecar itself.

Why each check:
- its pins are uv.lock's versions, so the environment the suite tests the app in (the dev
  group) and the one adopters build never drift apart;
- every import of the app's Python files is the standard library, the app's own package or a
  distribution the file names: an ``import indexer`` slipped into the stack fails here at once;
- a fresh virtual environment built from the file alone (uv's cache: seconds) runs the pinned
  ``cdk synth`` of both stacks, and has neither torch nor the sidecar in it.
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
CONTEXT = {  # literal values: synth makes no AWS call with them (no lookups)
    "mailTable": "aecs-mail",
    "mailTableStreamArn":
        "arn:aws:dynamodb:us-east-1:123456789012:table/aecs-mail/stream/2024-01-01T00:00:00.000",
    "opensearchEndpoint": "https://search-mail-x.us-east-1.es.amazonaws.com",
    "opensearchDomainArn": "arn:aws:es:us-east-1:123456789012:domain/mail-x",
    "qdrantUrl": "https://qdrant.internal:6333",
    "qdrantApiKeySecretArn":
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:qdrant-key-AbCdEf",
    "apiTokensSecretArn":
        "arn:aws:secretsmanager:us-east-1:123456789012:secret:sidecar-api-tokens-AbCdEf",
    "vpcId": "vpc-0123456789abcdef0", "availabilityZones": "us-east-1a,us-east-1b",
    "privateSubnetIds": "subnet-0123456789abcdef0,subnet-0123456789abcdef1",
    "imageRepository": "mail-search-sidecar", "imageTag": "0.2.0",
    "account": "123456789012", "region": "us-east-1",
}


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


def test_cdk_synth_runs_from_the_requirements_alone(tmp_path: Path) -> None:
    uv = Path(sys.executable).with_name("uv")
    env_dir = tmp_path / "venv"
    subprocess.run([uv, "venv", "-q", "--python", sys.executable, env_dir], check=True,
                   capture_output=True, timeout=120)
    python = env_dir / "bin" / "python"
    installed = subprocess.run([uv, "pip", "install", "-q", "--python", python, "-r",
                                REQUIREMENTS], capture_output=True, text=True, timeout=600,
                               check=False)
    assert installed.returncode == 0, installed.stderr
    absent = subprocess.run(
        [python, "-c", "import importlib.util as u; print([m for m in ('torch', 'indexer', "
         "'search_api', 'boto3') if u.find_spec(m)])"],
        cwd=tmp_path, capture_output=True, text=True, check=True)
    assert absent.stdout.strip() == "[]", absent.stdout
    tools = subprocess.run(["bash", str(ROOT / "scripts" / "ensure-deploy-tools.sh"),
                            "--print-env"], check=True, capture_output=True, text=True).stdout
    cdk = dict(line.split("=", 1) for line in tools.splitlines() if "=" in line)["SIDECAR_CDK"]
    out = tmp_path / "cdk.out"
    context = [arg for k, v in CONTEXT.items() for arg in ("-c", f"{k}={v}")]
    synth = subprocess.run(
        [cdk, "synth", "--quiet", "--no-notices", "--no-version-reporting",
         "--app", f"{python} app.py", "-o", str(out), *context],
        cwd=CDK_DIR, capture_output=True, text=True, timeout=600, check=False,
        env={**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "1"})
    assert synth.returncode == 0, synth.stdout[-3000:] + synth.stderr[-3000:]
    for stack in ("MailSearchSidecar", "MailSearchSidecarLambda"):
        template = out / f"{stack}.template.json"
        assert template.is_file() and '"AWS::ECS::Cluster"' in template.read_text(), stack
