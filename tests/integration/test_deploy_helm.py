"""The Helm chart (deploy/helm/mail-search-sidecar) lints, renders and validates offline,
and renders what matters for running the sidecar on EKS.

Why each check:
- ``helm lint --strict`` and ``helm template`` through the pinned helm
  (scripts/ensure-deploy-tools.sh), with the default values, the production-like
  ``ci/production-values.yaml`` and KEDA switched on: what ``helm install`` would render.
- Every rendered manifest validated by ``kubernetes-validate`` against a pinned Kubernetes
  version, strictly (unknown fields are errors), offline; KEDA's ScaledObject (a CRD the
  package has no schema for) against the fields KEDA requires. The validation is shown to
  refuse broken manifests, and the chart to refuse broken values (its schema and its checks).
- Then the properties a deployment depends on: the tailer at one replica with its lease and
  never autoscaled; every container non-root with a read-only root and emptyDirs for what it
  writes; the API's probes on the routes the API really serves; a PodDisruptionBudget per
  role; one ServiceAccount per deploy/iam role with its IRSA annotation; settings in the
  ConfigMap and secrets only in the Secret; every command a real ``sidecar`` command whose
  options parse; every ``SIDECAR_*`` name a setting; values.yaml commented key by key.
"""

from __future__ import annotations

import base64
import functools
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import typer
import yaml

from indexer.cli.main import app
from indexer.settings import Settings
from search_api.routes import router

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "mail-search-sidecar"
PRODUCTION = CHART / "ci" / "production-values.yaml"
IAM_DIR = ROOT / "deploy" / "iam"
# EKS's current standard-support versions include 1.33; the package ships schemas 1.25-1.37.
KUBE_VERSION = "1.33.0"
RELEASE = "mail-search-sidecar"
ROLES = ("tailer", "fulltext", "vectors", "api")
# The deploy/iam policy (and so the ServiceAccount) each workload runs with.
IAM_ROLE_OF = {"tailer": "tailer", "fulltext": "workers", "vectors": "workers", "api": "api",
               "init": "operator", "backfill": "backfill"}
EMBEDDING_ROLES = {"vectors", "api"}  # they need the full (EXTRAS=vectors) image
# Settings typed as secrets, plus the API's token map (a string setting, secret by nature).
SECRET_SETTINGS = {f"SIDECAR_{name.upper()}" for name, field in Settings.model_fields.items()
                   if "SecretStr" in str(field.annotation)} | {"SIDECAR_API_TOKENS"}
# KEDA's ScaledObject (keda.sh/v1alpha1): what its CRD requires of what the chart renders.
SCALED_OBJECT_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["apiVersion", "kind", "metadata", "spec"],
    "properties": {"spec": {
        "type": "object", "required": ["scaleTargetRef", "triggers"],
        "properties": {
            "scaleTargetRef": {"type": "object", "required": ["name"]},
            "minReplicaCount": {"type": "integer", "minimum": 0},
            "maxReplicaCount": {"type": "integer", "minimum": 1},
            "pollingInterval": {"type": "integer"}, "cooldownPeriod": {"type": "integer"},
            "triggers": {"type": "array", "minItems": 1, "items": {
                "type": "object", "required": ["type", "metadata"],
                "properties": {"metadata": {"type": "object",
                                            "additionalProperties": {"type": "string"}}}}},
        }}},
}
_GROUP: Any = typer.main.get_command(app)


@functools.cache
def helm() -> str:
    """The pinned helm, installed by the project's script if this machine lacks it."""
    out = subprocess.run(["bash", str(ROOT / "scripts" / "ensure-deploy-tools.sh"),
                          "--print-env"], check=True, capture_output=True, text=True).stdout
    tools = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    return tools["SIDECAR_HELM"]


def run_helm(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([helm(), *args], capture_output=True, text=True, check=False,
                          timeout=120)


def render(*values: Path, sets: tuple[str, ...] = ()) -> list[dict[str, Any]]:
    """``helm template`` with the hooks (the init Job) included, as parsed documents."""
    args = ["template", RELEASE, str(CHART), "--namespace", "search",
            "--kube-version", KUBE_VERSION]
    for path in values:
        args += ["-f", str(path)]
    for item in sets:
        args += ["--set", item]
    done = run_helm(*args)
    assert done.returncode == 0, done.stderr
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def refusal(*values: Path, sets: tuple[str, ...] = ()) -> str:
    """The error ``helm template`` stops with ('' if it renders)."""
    args = ["template", RELEASE, str(CHART), "--kube-version", KUBE_VERSION]
    for path in values:
        args += ["-f", str(path)]
    for item in sets:
        args += ["--set", item]
    done = run_helm(*args)
    return "" if done.returncode == 0 else done.stderr


def validation_errors(docs: list[dict[str, Any]], version: str = KUBE_VERSION) -> list[str]:
    """Every manifest against Kubernetes ``version``'s schemas, strictly (unknown fields
    fail); a ScaledObject against KEDA's required fields. One line per problem."""
    import jsonschema

    errors = []
    for doc in docs:
        where = f"{doc.get('kind')}/{doc.get('metadata', {}).get('name')}"
        if str(doc.get("apiVersion", "")).startswith("keda.sh/"):
            problems = jsonschema.Draft7Validator(SCALED_OBJECT_SCHEMA).iter_errors(doc)
            errors += [f"{where}: {p.message}" for p in problems]
            continue
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as exc:
            errors.append(f"{where}: {exc.message}")
        except kubernetes_validate.SchemaNotFoundError:
            errors.append(f"{where}: no schema for {doc.get('apiVersion')} in {version}")
    return errors


def of_kind(docs: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """Manifests of one kind by component label (or name)."""
    found = {}
    for doc in docs:
        if doc["kind"] == kind:
            labels = doc["metadata"].get("labels", {})
            found[labels.get("app.kubernetes.io/component", doc["metadata"]["name"])] = doc
    return found


def pod_specs(docs: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any]]]:
    """(component, pod spec) of every workload: Deployments, Jobs, CronJobs."""
    for doc in docs:
        component = doc["metadata"]["labels"].get("app.kubernetes.io/component", "?")
        if doc["kind"] in ("Deployment", "Job"):
            yield component, doc["spec"]["template"]["spec"]
        elif doc["kind"] == "CronJob":
            yield component, doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]


def values_of(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load(path.read_text(encoding="utf-8"))
    return loaded


# --- lint, render, validate ---------------------------------------------------------------


@pytest.fixture(scope="module")
def default() -> list[dict[str, Any]]:
    started = time.monotonic()
    docs = render()
    print(f"helm template (defaults): {time.monotonic() - started:.2f} s, {len(docs)} manifests")
    return docs


@pytest.fixture(scope="module")
def production() -> list[dict[str, Any]]:
    return render(PRODUCTION)


@pytest.fixture(scope="module")
def with_keda() -> list[dict[str, Any]]:
    return render(PRODUCTION, sets=("fulltext.keda.enabled=true", "vectors.keda.enabled=true",
                                    "keda.redis.address=redis.internal:6379",
                                    "keda.redis.enableTLS=true"))


@pytest.mark.parametrize("values", [(), (PRODUCTION,)], ids=["default", "production"])
def test_helm_lint_is_clean(values: tuple[Path, ...]) -> None:
    args = ["lint", str(CHART), "--strict", "--kube-version", KUBE_VERSION]
    for path in values:
        args += ["-f", str(path)]
    done = run_helm(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 chart(s) failed" in done.stdout
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout


@pytest.mark.parametrize("which", ["default", "production", "with_keda"])
def test_every_rendered_manifest_validates(which: str, request: pytest.FixtureRequest) -> None:
    docs: list[dict[str, Any]] = request.getfixturevalue(which)
    started = time.monotonic()
    assert validation_errors(docs) == []
    print(f"{which}: {len(docs)} manifests valid for Kubernetes {KUBE_VERSION} "
          f"({time.monotonic() - started:.2f} s)")
    kinds = {doc["kind"] for doc in docs}
    assert {"Deployment", "ConfigMap", "Secret", "ServiceAccount", "Service",
            "PodDisruptionBudget", "HorizontalPodAutoscaler", "Job", "CronJob"} <= kinds


def test_the_validation_refuses_broken_manifests(production: list[dict[str, Any]]) -> None:
    """Each way a manifest can be wrong is caught: a wrong type, an unknown field (strict),
    a missing required field, an API version the pinned Kubernetes does not serve, and a
    ScaledObject without triggers."""
    deployment = of_kind(production, "Deployment")["api"]

    def broken(change: Any) -> list[str]:
        doc = yaml.safe_load(yaml.safe_dump(deployment))
        change(doc)
        return validation_errors([doc])

    assert broken(lambda d: d["spec"].update(replicas="two"))
    assert broken(lambda d: d["spec"]["template"]["spec"]["containers"][0].update(
        readOnlyRootFileSystem=True))  # misspelt: strict validation refuses the field
    assert broken(lambda d: d["spec"]["template"]["spec"]["containers"][0].pop("name"))
    assert broken(lambda d: d["spec"]["template"]["spec"]["containers"][0]["livenessProbe"]
                  ["httpGet"].update(port=[8080]))
    assert broken(lambda d: d.update(apiVersion="extensions/v1beta1"))
    assert validation_errors([{"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledObject",
                               "metadata": {"name": "x"},
                               "spec": {"scaleTargetRef": {"name": "x"}}}])
    assert broken(lambda d: None) == []  # the unchanged copy is valid


@pytest.mark.parametrize(("sets", "expected"), [
    (("tailer.replicas=3",), "maximum"),  # a shard admits two readers
    (("config.SIDECAR_API_TOKENS=x",), "SIDECAR_API_TOKENS"),  # a secret in the ConfigMap
    (("config.SIDECAR_QDRANT_URL=",), "SIDECAR_QDRANT_URL"),  # embedded Qdrant: one process
    (("config.SIDECAR_METRICS_PORT=1",), "set by the chart"),
    (("config.sidecar_table=x",), "sidecar_table"),  # not a SIDECAR_* name
    (("fulltext.concurency=4",), "concurency"),  # a misspelt key is not silently ignored
    (("tailer.renewSeconds=9",), "renewSeconds"),  # a renewal missed would lose the lease
    (("api.pdb.maxUnavailable=1",), "not both"),
    (("serviceAccounts.api.roleArn=my-role",), "roleArn"),
    (("fulltext.keda.enabled=true",), "keda.redis.address"),
])
def test_broken_values_are_refused(sets: tuple[str, ...], expected: str) -> None:
    error = refusal(PRODUCTION, sets=sets)
    assert error, f"rendered with {sets}"
    assert expected in error, error


# --- what matters ---------------------------------------------------------------------


@pytest.mark.parametrize("which", ["default", "production", "with_keda"])
def test_the_tailer_is_one_reader_with_a_lease(which: str,
                                               request: pytest.FixtureRequest) -> None:
    docs: list[dict[str, Any]] = request.getfixturevalue(which)
    values = values_of(CHART / "values.yaml")["tailer"]
    if which != "default":
        values = {**values, **values_of(PRODUCTION).get("tailer", {})}
    tailer = of_kind(docs, "Deployment")["tailer"]
    assert tailer["spec"]["replicas"] == 1
    command = tailer["spec"]["template"]["spec"]["containers"][0]["command"]
    assert command[:2] == ["sidecar", "tail"]
    assert command[command.index("--lease-s") + 1] == str(values["leaseSeconds"])
    assert command[command.index("--renew-s") + 1] == str(values["renewSeconds"])
    assert float(values["renewSeconds"]) * 2 <= float(values["leaseSeconds"])
    # Never autoscaled: no HPA or ScaledObject targets it.
    for kind in ("HorizontalPodAutoscaler", "ScaledObject"):
        assert "tailer" not in of_kind(docs, kind)
    # The rollout starts the new pod before stopping the old: it stands by on the lease.
    assert tailer["spec"]["strategy"]["rollingUpdate"] == {"maxSurge": 1, "maxUnavailable": 0}


@pytest.mark.parametrize("which", ["default", "production"])
def test_every_container_is_non_root_with_a_read_only_root(
    which: str, request: pytest.FixtureRequest
) -> None:
    docs: list[dict[str, Any]] = request.getfixturevalue(which)
    seen = set()
    for component, spec in pod_specs(docs):
        seen.add(component)
        pod = spec.get("securityContext", {})
        assert spec["automountServiceAccountToken"] is False, component
        volumes = {v["name"]: v for v in spec.get("volumes", [])}
        for container in spec["containers"] + spec.get("initContainers", []):
            ctx = container["securityContext"]
            assert ctx.get("runAsNonRoot", pod.get("runAsNonRoot")) is True, component
            assert ctx.get("runAsUser", pod.get("runAsUser", 0)) != 0, component
            assert ctx["readOnlyRootFilesystem"] is True, component
            assert ctx["allowPrivilegeEscalation"] is False, component
            assert ctx["capabilities"]["drop"] == ["ALL"], component
            mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
            # What the processes write: the workers' Prometheus multiprocess directory
            # (tempfile.mkdtemp), ~/.cache, the default state directory; each an emptyDir.
            for path in ("/tmp", "/home/sidecar/.cache", "/home/sidecar/.sidecar"):
                assert "emptyDir" in volumes[mounts[path]], (component, path)
    assert seen == {"tailer", "fulltext", "vectors", "api", "init", "backfill"}


def test_the_api_probes_the_routes_it_serves(production: list[dict[str, Any]]) -> None:
    routes = {getattr(r, "path", "") for r in router.routes}
    assert {"/healthz", "/readyz"} <= routes
    api = of_kind(production, "Deployment")["api"]["spec"]["template"]["spec"]
    container = api["containers"][0]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    command = container["command"]
    assert ports["http"] == int(command[command.index("--port") + 1]) == 8080
    assert ports["metrics"] == int(command[command.index("--metrics-port") + 1])
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http"}
    assert container["startupProbe"]["httpGet"]["path"] == "/healthz"
    # The Service carries the search routes only, never the metrics port.
    service = of_kind(production, "Service")["api"]
    assert [p["targetPort"] for p in service["spec"]["ports"]] == ["http"]
    ingress = of_kind(production, "Ingress")["api"]
    assert ingress["metadata"]["annotations"][
        "alb.ingress.kubernetes.io/healthcheck-path"] == "/healthz"  # liveness (issue 40)
    # The tailer and workers: liveness on their metrics port (it answers while they run).
    for role in ("tailer", "fulltext", "vectors"):
        spec = of_kind(production, "Deployment")[role]["spec"]["template"]["spec"]
        probe = spec["containers"][0]["livenessProbe"]["httpGet"]
        assert probe == {"path": "/metrics", "port": "metrics"}, role
        env = {e["name"]: e.get("value") for e in spec["containers"][0]["env"]}
        port = {p["name"]: p["containerPort"] for p in spec["containers"][0]["ports"]}
        assert env["SIDECAR_METRICS_PORT"] == str(port["metrics"]), role


@pytest.mark.parametrize("which", ["default", "production"])
def test_a_disruption_budget_per_role(which: str, request: pytest.FixtureRequest) -> None:
    docs: list[dict[str, Any]] = request.getfixturevalue(which)
    budgets = of_kind(docs, "PodDisruptionBudget")
    deployments = of_kind(docs, "Deployment")
    assert set(budgets) == set(deployments) == set(ROLES)
    for role, budget in budgets.items():
        pod_labels = deployments[role]["spec"]["template"]["metadata"]["labels"]
        selector = budget["spec"]["selector"]["matchLabels"]
        assert selector.items() <= pod_labels.items(), role
        assert selector == deployments[role]["spec"]["selector"]["matchLabels"], role
    # A drain may move the single tailer (the lease hands over); the API keeps one serving.
    assert budgets["tailer"]["spec"]["maxUnavailable"] == 1
    assert budgets["api"]["spec"]["minAvailable"] >= 1
    hpa = of_kind(docs, "HorizontalPodAutoscaler")
    assert hpa["api"]["spec"]["minReplicas"] > budgets["api"]["spec"]["minAvailable"]


def test_one_service_account_per_iam_role_with_irsa(
    default: list[dict[str, Any]], production: list[dict[str, Any]]
) -> None:
    assert {p.stem for p in IAM_DIR.glob("*.json")} == set(IAM_ROLE_OF.values())
    accounts = {sa["metadata"]["name"]: sa for sa in production
                if sa["kind"] == "ServiceAccount"}
    arns = {role: sa["roleArn"]
            for role, sa in values_of(PRODUCTION)["serviceAccounts"].items()}
    assert set(accounts) == {f"{RELEASE}-{r}" for r in IAM_ROLE_OF.values()}
    for component, spec in pod_specs(production):
        iam_role = IAM_ROLE_OF[component]
        name = spec["serviceAccountName"]
        assert name == f"{RELEASE}-{iam_role}", component
        annotations = accounts[name]["metadata"]["annotations"]
        assert annotations["eks.amazonaws.com/role-arn"] == arns[iam_role], component
        assert arns[iam_role].endswith(f"-{iam_role}")
    # No ARN configured: no annotation (rather than an empty one IRSA would choke on).
    for sa in (d for d in default if d["kind"] == "ServiceAccount"):
        assert "eks.amazonaws.com/role-arn" not in sa["metadata"].get("annotations", {})


def test_settings_in_the_config_map_and_secrets_only_in_the_secret(
    production: list[dict[str, Any]]
) -> None:
    values = values_of(PRODUCTION)
    config = of_kind(production, "ConfigMap")[f"{RELEASE}-config"]["data"]
    assert config["SIDECAR_OPENSEARCH_AUTH"] == "sigv4"
    assert not set(config) & SECRET_SETTINGS
    assert {"SIDECAR_CURSOR_KEY", "SIDECAR_QDRANT_API_KEY", "SIDECAR_OPENSEARCH_PASSWORD",
            "SIDECAR_AWS_ROLE_EXTERNAL_ID"} <= SECRET_SETTINGS
    secret = of_kind(production, "Secret")[f"{RELEASE}-secrets"]
    stored = {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert stored == values["secrets"]["values"]
    everything_else = yaml.safe_dump_all([d for d in production if d["kind"] != "Secret"])
    for key, secret_value in values["secrets"]["values"].items():
        assert secret_value not in everything_else, key
    # Each role reads only the secret keys it uses; the API alone gets tokens and cursor key.
    for role, deployment in of_kind(production, "Deployment").items():
        env = deployment["spec"]["template"]["spec"]["containers"][0]["env"]
        from_secret = {e["name"] for e in env if "secretKeyRef" in e.get("valueFrom", {})}
        assert from_secret <= SECRET_SETTINGS | {"SIDECAR_REDIS_URL"}, role
        assert ("SIDECAR_API_TOKENS" in from_secret) is (role == "api"), role
        for e in env:
            if "valueFrom" in e:
                assert e["valueFrom"]["secretKeyRef"]["name"] == f"{RELEASE}-secrets"


def test_an_existing_secret_replaces_the_charts() -> None:
    docs = render(PRODUCTION, sets=("secrets.existingSecret=sidecar-from-secrets-manager",))
    assert "Secret" not in {d["kind"] for d in docs}
    for component, spec in pod_specs(docs):
        for env in spec["containers"][0]["env"]:
            if "valueFrom" in env:
                ref = env["valueFrom"]["secretKeyRef"]
                assert ref["name"] == "sidecar-from-secrets-manager", component


@pytest.mark.parametrize("which", ["default", "production"])
def test_every_sidecar_name_is_a_setting(which: str, request: pytest.FixtureRequest) -> None:
    docs: list[dict[str, Any]] = request.getfixturevalue(which)
    names = set(re.findall(r"\bSIDECAR_[A-Z0-9_]+", yaml.safe_dump_all(docs)))
    unknown = sorted(n for n in names if n[len("SIDECAR_"):].lower() not in Settings.model_fields)
    assert unknown == []


@pytest.mark.parametrize("which", ["default", "production"])
def test_every_command_is_a_real_command_with_valid_options(
    which: str, request: pytest.FixtureRequest
) -> None:
    docs: list[dict[str, Any]] = request.getfixturevalue(which)
    commands = {component: spec["containers"][0]["command"]
                for component, spec in pod_specs(docs)}
    assert commands["fulltext"][2:4] == ["--role", "fulltext"]
    assert commands["vectors"][2:4] == ["--role", "vectors"]
    assert commands["api"][:2] == ["sidecar", "serve"]
    for component, command in commands.items():
        assert command[0] == "sidecar", component
        sub = _GROUP.get_command(typer.Context(_GROUP), command[1])
        assert sub is not None, component
        sub.make_context(command[1], command[2:])  # UsageError on a bad option or value


def test_images_per_role(default: list[dict[str, Any]],
                         production: list[dict[str, Any]]) -> None:
    values = values_of(PRODUCTION)
    full = f"{values['image']['repository']}:{values['image']['tag']}"
    slim = f"{values['slimImage']['repository']}:{values['slimImage']['tag']}"
    for component, spec in pod_specs(production):
        image = spec["containers"][0]["image"]
        assert image == (full if component in EMBEDDING_ROLES else slim), component
    # Without a slim image every role runs the full one, tagged with the chart's appVersion.
    app_version = values_of(CHART / "Chart.yaml")["appVersion"]
    assert {spec["containers"][0]["image"] for _, spec in pod_specs(default)} == {
        f"mail-search-sidecar:{app_version}"}


def test_autoscaling(production: list[dict[str, Any]],
                     with_keda: list[dict[str, Any]]) -> None:
    hpa = of_kind(production, "HorizontalPodAutoscaler")
    assert set(hpa) == {"fulltext", "vectors", "api"}
    for role, doc in hpa.items():
        assert doc["spec"]["scaleTargetRef"]["name"] == f"{RELEASE}-{role}"
        assert doc["spec"]["metrics"][0]["resource"]["name"] == "cpu"
        deployment = of_kind(production, "Deployment")[role]
        assert "replicas" not in deployment["spec"], role  # the HPA owns it
        requests = deployment["spec"]["template"]["spec"]["containers"][0]["resources"]
        assert "cpu" in requests["requests"], role  # utilisation needs a request
    # KEDA on: a ScaledObject per worker role on its Redis list, and no HPA of ours for it.
    scaled = of_kind(with_keda, "ScaledObject")
    assert set(scaled) == {"fulltext", "vectors"}
    assert set(of_kind(with_keda, "HorizontalPodAutoscaler")) == {"api"}
    prefix = values_of(PRODUCTION)["config"].get("SIDECAR_QUEUE_PREFIX", "sidecar")
    for role, doc in scaled.items():
        trigger = doc["spec"]["triggers"][0]
        assert trigger["type"] == "redis"
        assert trigger["metadata"]["listName"] == f"{prefix}.{role}"
        assert doc["spec"]["scaleTargetRef"]["name"] == f"{RELEASE}-{role}"
    assert "ScaledObject" not in {d["kind"] for d in production}  # off by default


def test_values_are_documented_key_by_key() -> None:
    """Every key of values.yaml has a comment line above it, except the fields of
    Kubernetes' own objects (securityContext, resources), documented by Kubernetes."""
    exempt = {"podSecurityContext", "securityContext", "resources"}
    stack: list[tuple[int, str]] = []
    undocumented = []
    previous = ""
    for line in (CHART / "values.yaml").read_text(encoding="utf-8").splitlines():
        key = re.match(r"^(\s*)([A-Za-z_][A-Za-z0-9_.-]*):", line)
        if key:
            indent = len(key.group(1))
            while stack and stack[-1][0] >= indent:
                stack.pop()
            if not exempt & {k for _, k in stack} and not previous.lstrip().startswith("#"):
                undocumented.append(".".join([k for _, k in stack] + [key.group(2)]))
            stack.append((indent, key.group(2)))
        if line.strip():
            previous = line
    assert undocumented == []


def test_without_the_tailer_for_the_lambda_reader() -> None:
    """``tailer.enabled=false`` (the Lambda reader of deploy/cdk reads the stream instead):
    no tailer Deployment or budget, the rest unchanged and valid."""
    docs = render(PRODUCTION, sets=("tailer.enabled=false",))
    assert validation_errors(docs) == []
    assert set(of_kind(docs, "Deployment")) == {"fulltext", "vectors", "api"}
    assert set(of_kind(docs, "PodDisruptionBudget")) == {"fulltext", "vectors", "api"}
