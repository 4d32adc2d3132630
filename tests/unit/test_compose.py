"""docker-compose.yml stays in step with the settings: parsed only, no Docker, no services."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
import yaml

from indexer.settings import Settings

COMPOSE = Path(__file__).resolve().parents[2] / "docker-compose.yml"
PREFIX = "SIDECAR_"
ENGINES = ("opensearch", "qdrant", "redis", "dynamodb")
SIDECAR_SERVICES = {
    "worker": ["sidecar", "worker"],
    "tailer": ["sidecar", "tail"],
    "api": ["sidecar", "serve", "--host", "0.0.0.0", "--port", "8080"],
}
REQUIRED_ENV = {
    "SIDECAR_AWS_ENDPOINT_URL": "http://dynamodb:5000",
    "SIDECAR_OPENSEARCH_URL": "http://opensearch:9200",
    "SIDECAR_REDIS_URL": "redis://redis:6379/0",
    "SIDECAR_QDRANT_URL": "http://qdrant:6333",
}
_SIDECAR_VAR = re.compile(r"\bSIDECAR_[A-Z0-9_]+")


def sidecar_vars(text: str) -> set[str]:
    """Every ``SIDECAR_*`` name in a compose file: keys, ``${...}`` references, comments."""
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


def test_engines_images_and_healthchecks(services: dict[str, dict[str, Any]]) -> None:
    assert set(ENGINES) | set(SIDECAR_SERVICES) <= set(services)
    assert services["opensearch"]["image"] == "opensearchproject/opensearch:2.19.1"
    assert re.fullmatch(r"qdrant/qdrant:v1\.\d+\.\d+", services["qdrant"]["image"])
    assert services["redis"]["image"] == "redis:7"
    assert services["dynamodb"]["image"] == "motoserver/moto:5.2.5"

    tests = {name: " ".join(services[name]["healthcheck"]["test"]) for name in ENGINES}
    assert "curl" in tests["opensearch"]
    assert "/_cluster/health" in tests["opensearch"]
    assert "/readyz" in tests["qdrant"]
    assert "redis-cli ping" in tests["redis"]
    assert ":5000" in tests["dynamodb"]


def test_engine_configuration(compose: dict[str, Any], services: dict[str, dict[str, Any]]) -> None:
    os_env = env_of(services["opensearch"])
    assert os_env["discovery.type"] == "single-node"
    assert os_env["DISABLE_SECURITY_PLUGIN"] == "true"
    assert os_env["OPENSEARCH_JAVA_OPTS"] == "-Xms512m -Xmx1g"
    assert services["redis"]["command"] == ["redis-server", "--appendonly", "yes"]

    published = {
        name: [str(p).rsplit(":", 1)[-1] for p in services[name].get("ports", [])]
        for name in services
    }
    assert published["opensearch"] == ["9200"]
    assert published["qdrant"] == ["6333"]
    assert published["dynamodb"] == ["5000"]
    assert published["api"] == ["8080"]

    declared = set(compose["volumes"])
    for name in ("opensearch", "qdrant", "redis"):
        mounted = {v.split(":", 1)[0] for v in services[name]["volumes"]}
        assert mounted and mounted <= declared, name


def test_every_sidecar_variable_is_a_setting(text: str, compose: dict[str, Any]) -> None:
    names = sidecar_vars(text)
    shared = {k for k in compose["x-sidecar-env"] if k.startswith(PREFIX)}
    assert set(REQUIRED_ENV) <= shared <= names  # the scan really sees the file's variables
    assert unknown_sidecar_vars(text) == []


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


@pytest.mark.parametrize("name", sorted(SIDECAR_SERVICES))
def test_sidecar_service(
    name: str, compose: dict[str, Any], services: dict[str, dict[str, Any]]
) -> None:
    service = services[name]
    assert service["build"] == "."
    assert service["image"] == "mail-search-sidecar:dev"
    assert service["command"] == SIDECAR_SERVICES[name]

    env = env_of(service)
    assert env == env_of({"environment": compose["x-sidecar-env"]})  # one shared block
    for var, value in REQUIRED_ENV.items():
        assert env.get(var) == value, var
    foreign = sorted(k for k in env if not k.startswith((PREFIX, "AWS_")))
    assert foreign == []
    for var in REQUIRED_ENV:
        host = urlparse(env[var]).hostname
        assert host in services, f"{var} points at {host}, not a service"

    depends = service["depends_on"]
    assert isinstance(depends, dict)
    for engine in ENGINES:
        assert depends.get(engine, {}).get("condition") == "service_healthy", engine
