"""Alerting and dashboards (issue 40): the Prometheus rules of deploy/prometheus, the Grafana
dashboard, and the chart's opt-in ServiceMonitor and PrometheusRule.

Why each check:
- ``promtool check rules`` and ``promtool test rules`` (Debian's prometheus package, installed
  by scripts/ensure-test-tools.sh) on the shipped files: each alert fires on its condition with
  its rendered texts and stays quiet short of it; a copy with one threshold changed is shown to
  fail those unit tests, so they can fail.
- Every ``sidecar_*`` metric the rules and the dashboard name is one the code defines (a
  renamed metric would otherwise leave an alert that never fires), every dashboard query parses
  as PromQL (promtool, through a throwaway recording rule per query), and every runbook link
  resolves to a heading of docs/.
- ``helm template`` with monitoring on renders the ServiceMonitor and the PrometheusRule, valid
  for Kubernetes (kubernetes-validate) and for their CRDs' schemas (vendored from
  prometheus-operator in tests/data/crd-schemas, strict: unknown fields fail); the rule groups
  are deploy/prometheus's, less the tailer's alerts without a tailer; the ServiceMonitor's
  Services select the role pods and their metrics port.
"""

from __future__ import annotations

import copy
import functools
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from markdown.extensions.toc import slugify

from tests.integration.test_deploy_helm import PRODUCTION, of_kind, render, validation_errors

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "sidecar-rules.yml"
RULES_TEST = ROOT / "deploy" / "prometheus" / "sidecar-rules.test.yml"
SCRAPE_EXAMPLE = ROOT / "deploy" / "prometheus" / "scrape-example.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "mail-search-sidecar.json"
CRD_SCHEMAS = ROOT / "tests" / "data" / "crd-schemas"
MONITORING = ("monitoring.serviceMonitor.enabled=true", "monitoring.prometheusRule.enabled=true")
ROLES = ("tailer", "fulltext", "vectors", "api")


@functools.cache
def promtool() -> str:
    """Debian's promtool; scripts/ensure-test-tools.sh installs it before the suite runs."""
    found = shutil.which("promtool") or ("/usr/bin/promtool"
                                         if Path("/usr/bin/promtool").exists() else None)
    assert found, "promtool missing: run `bash scripts/ensure-test-tools.sh` (apt: prometheus)"
    return found


def run_promtool(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), *args], capture_output=True, text=True, check=False,
                          timeout=120, cwd=cwd)


def rule_groups() -> list[dict[str, Any]]:
    groups: list[dict[str, Any]] = yaml.safe_load(RULES.read_text(encoding="utf-8"))["groups"]
    return groups


def alerts() -> list[dict[str, Any]]:
    return [rule for group in rule_groups() for rule in group["rules"] if "alert" in rule]


def defined_metrics() -> set[str]:
    """Every ``sidecar_*`` metric family the code defines (indexer/), by its exposed names:
    a counter's ``_total`` and a histogram's ``_bucket``/``_count``/``_sum``."""
    names: set[str] = set()
    for path in (ROOT / "indexer").rglob("*.py"):
        names.update(re.findall(r'"(sidecar_[a-z0-9_]+)"', path.read_text(encoding="utf-8")))
    exposed = set(names)
    for name in names:
        exposed.update({f"{name}_bucket", f"{name}_count", f"{name}_sum"})
    return exposed


def metrics_named(expression: str) -> set[str]:
    return set(re.findall(r"\bsidecar_[a-z0-9_]+", expression))


def dashboard_queries() -> list[tuple[str, str]]:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    return [(panel["title"], target["expr"]) for panel in board["panels"]
            for target in panel.get("targets", [])]


def anchors(doc: Path) -> set[str]:
    """The heading ids mkdocs gives ``doc`` (the toc extension's default slugify)."""
    text = doc.read_text(encoding="utf-8")
    text = re.sub(r"```.*?```", "", text, flags=re.S)  # no headings inside code blocks
    return {slugify(m.group(1).strip(), "-") for m in re.finditer(r"^#{1,6} (.+)$", text, re.M)}


def runbook_problems(links: list[str]) -> list[str]:
    """``docs/...md#anchor`` links that name no file or no heading of it."""
    problems = []
    for link in links:
        path, _, anchor = link.partition("#")
        doc = ROOT / path
        if not path.startswith("docs/") or not doc.is_file():
            problems.append(f"{link}: no such page")
        elif not anchor or anchor not in anchors(doc):
            problems.append(f"{link}: no heading #{anchor} in {path}")
    return problems


# --- the rules themselves ---------------------------------------------------------------


def test_promtool_checks_and_unit_tests_the_rules() -> None:
    checked = run_promtool("check", "rules", str(RULES))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in checked.stdout
    tested = run_promtool("test", "rules", str(RULES_TEST))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout
    # Every alert has at least one case where the unit tests expect it to fire.
    cases = yaml.safe_load(RULES_TEST.read_text(encoding="utf-8"))["tests"]
    fired = {case["alertname"] for test in cases for case in test["alert_rule_test"]
             if case["exp_alerts"]}
    assert fired == {rule["alert"] for rule in alerts()}
    config = run_promtool("check", "config", str(SCRAPE_EXAMPLE))
    assert config.returncode == 0, config.stdout + config.stderr


@pytest.mark.parametrize(("alert", "before", "after"), [
    ("SidecarStreamLagHigh", "> 300", "> 3000"),
    ("SidecarTailerDown", 'up{role="tailer"} == 1', 'up{role="tailer"}'),  # up==0 no longer
    # Without its second term a crash-looping tailer (up now and then) never alarms.
    ("SidecarTailerDown", 'or absent(avg_over_time(up{role="tailer"}[10m]) > 0.5)', ""),
])
def test_the_rule_tests_fail_on_a_changed_rule(tmp_path: Path, alert: str, before: str,
                                               after: str) -> None:
    rules = RULES.read_text(encoding="utf-8")
    start = rules.index(f"- alert: {alert}\n")
    end = rules.index("- alert:", start + 1)
    assert before in rules[start:end]
    (tmp_path / RULES.name).write_text(
        rules[:start] + rules[start:end].replace(before, after) + rules[end:], encoding="utf-8")
    shutil.copy(RULES_TEST, tmp_path / RULES_TEST.name)
    assert run_promtool("check", "rules", RULES.name, cwd=tmp_path).returncode == 0
    tested = run_promtool("test", "rules", RULES_TEST.name, cwd=tmp_path)
    assert tested.returncode != 0
    assert f"alertname: {alert}" in tested.stdout + tested.stderr


def test_every_alert_names_defined_metrics_a_severity_and_a_runbook() -> None:
    known = defined_metrics()
    assert {"sidecar_stream_lag_seconds", "sidecar_redis_up", "sidecar_dlq_entries",
            "sidecar_api_request_seconds_bucket", "sidecar_stalled"} <= known
    unknown = {rule["alert"]: metrics_named(rule["expr"]) - known for rule in alerts()}
    assert {a: names for a, names in unknown.items() if names} == {}
    for rule in alerts():
        assert rule["labels"]["severity"] in {"critical", "warning"}, rule["alert"]
        assert {"summary", "description", "runbook"} <= set(rule["annotations"]), rule["alert"]
    assert runbook_problems([rule["annotations"]["runbook"] for rule in alerts()]) == []
    # The link check is a real check: a misspelt anchor and a missing page are reported.
    assert runbook_problems(["docs/operations/runbooks.md#lag-is-grwoing",
                             "docs/operations/nowhere.md#x"]) != []
    assert len(runbook_problems(["docs/operations/runbooks.md#lag-is-grwoing"])) == 1
    # The liveness alerts alarm on absence (a dead process emits nothing), one per role.
    down = {rule["labels"].get("role") for rule in alerts()
            if rule["expr"].startswith("absent(up{")}
    assert down == set(ROLES)


def test_the_grafana_dashboard_queries_parse_and_name_defined_metrics(tmp_path: Path) -> None:
    board = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    ids = [panel["id"] for panel in board["panels"]]
    assert len(ids) == len(set(ids))
    assert board["templating"]["list"][0] == {
        "name": "datasource", "label": "Prometheus", "type": "datasource",
        "query": "prometheus", "current": {}, "hide": 0}
    queries = dashboard_queries()
    assert len(queries) >= 15
    known = defined_metrics()
    assert {title: metrics_named(expr) - known for title, expr in queries
            if metrics_named(expr) - known} == {}
    for panel in board["panels"]:
        if panel["type"] != "row":
            assert panel["datasource"]["uid"] == "${datasource}", panel["title"]
    # Every query as a recording rule: promtool parses each expression.
    rules = {"groups": [{"name": "dashboard", "rules": [
        {"record": f"dashboard:query{i}", "expr": expr} for i, (_, expr) in enumerate(queries)]}]}
    path = tmp_path / "dashboard-queries.yml"
    path.write_text(yaml.safe_dump(rules), encoding="utf-8")
    checked = run_promtool("check", "rules", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # ... and a malformed one is refused (the check can fail).
    path.write_text(yaml.safe_dump({"groups": [{"name": "x", "rules": [
        {"record": "x:y", "expr": "sum by (le (rate(sidecar_redis_up[5m]))"}]}]}),
        encoding="utf-8")
    assert run_promtool("check", "rules", str(path)).returncode != 0


# --- the chart's ServiceMonitor and PrometheusRule ---------------------------------------


def _strict(schema: Any) -> Any:
    """A CRD schema as the API server's strict field validation applies it: an object's
    unknown fields are errors unless it preserves unknown fields or declares a map."""
    if isinstance(schema, list):
        return [_strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: _strict(value) for key, value in schema.items()}
    if (out.get("type") == "object" and "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")):
        out["additionalProperties"] = False
    return out


@functools.cache
def crd_validator(kind: str) -> jsonschema.protocols.Validator:
    schema = json.loads((CRD_SCHEMAS / f"monitoring.coreos.com_{kind.lower()}_v1.json")
                        .read_text(encoding="utf-8"))
    strict = _strict(schema)
    # metadata is the API server's ObjectMeta (kubernetes-validate checks built-in kinds').
    strict["properties"]["metadata"] = {"type": "object"}
    validator: jsonschema.protocols.Validator = jsonschema.Draft7Validator(strict)
    return validator


def monitoring_errors(docs: list[dict[str, Any]]) -> list[str]:
    """Built-in kinds through kubernetes-validate (test_deploy_helm's checks), the
    Prometheus Operator's kinds against their vendored CRD schemas."""
    errors, builtin = [], []
    for doc in docs:
        if doc.get("apiVersion") == "monitoring.coreos.com/v1":
            where = f"{doc['kind']}/{doc['metadata']['name']}"
            errors += [f"{where}: {e.message}"
                       for e in crd_validator(doc["kind"]).iter_errors(doc)]
        else:
            builtin.append(doc)
    return errors + validation_errors(builtin)


@pytest.fixture(scope="module")
def monitored() -> list[dict[str, Any]]:
    return render(PRODUCTION, sets=MONITORING)


def test_monitoring_is_off_by_default(monitored: list[dict[str, Any]]) -> None:
    kinds = {doc["kind"] for doc in render(PRODUCTION)}
    assert not kinds & {"ServiceMonitor", "PrometheusRule"}
    assert {"ServiceMonitor", "PrometheusRule"} <= {doc["kind"] for doc in monitored}


def test_the_monitoring_manifests_validate_against_their_crds(
        monitored: list[dict[str, Any]]) -> None:
    assert monitoring_errors(monitored) == []
    # The CRD validation refuses what the operator would: a misspelt field (strict), a wrong
    # type, a rule group without its name.
    monitor = next(d for d in monitored if d["kind"] == "ServiceMonitor")
    rule = next(d for d in monitored if d["kind"] == "PrometheusRule")

    def broken(doc: dict[str, Any], change: Any) -> list[str]:
        doc = copy.deepcopy(doc)
        change(doc)
        return monitoring_errors([doc])

    assert broken(monitor, lambda d: d["spec"]["endpoints"][0].update(intervall="30s"))
    assert broken(monitor, lambda d: d["spec"]["endpoints"][0].update(port=9400))
    assert broken(rule, lambda d: d["spec"]["groups"][0].pop("name"))
    assert broken(rule, lambda d: d["spec"]["groups"][0]["rules"][0].update(for_="5m"))
    assert broken(rule, lambda d: None) == []


@pytest.mark.parametrize("tailer", [True, False])
def test_the_prometheus_rule_is_deploy_prometheus_rules(tailer: bool) -> None:
    docs = render(PRODUCTION, sets=(*MONITORING, f"tailer.enabled={str(tailer).lower()}"))
    assert monitoring_errors(docs) == []
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    expected = rule_groups()
    if not tailer:  # the Lambda reader: no tailer, and its alerts would fire forever
        expected = [{**g, "rules": [r for r in g["rules"]
                                    if r.get("labels", {}).get("role") != "tailer"]}
                    for g in expected]
        assert sum(len(g["rules"]) for g in expected) == len(alerts()) - 2
    assert rule["spec"]["groups"] == expected


def test_the_service_monitor_scrapes_every_role_with_its_role_label(
        monitored: list[dict[str, Any]]) -> None:
    monitor = next(d for d in monitored if d["kind"] == "ServiceMonitor")
    selector = monitor["spec"]["selector"]["matchLabels"]
    services = [d for d in monitored if d["kind"] == "Service"
                and selector.items() <= d["metadata"]["labels"].items()]
    deployments = of_kind(monitored, "Deployment")
    assert {s["metadata"]["labels"]["app.kubernetes.io/component"] for s in services} == set(
        ROLES)
    endpoint = monitor["spec"]["endpoints"][0]
    for service in services:
        role = service["metadata"]["labels"]["app.kubernetes.io/component"]
        pod = deployments[role]["spec"]["template"]
        # The Service selects the role's pods and names their metrics port.
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items(), role
        assert service["spec"]["clusterIP"] == "None"
        port = service["spec"]["ports"][0]
        assert port["name"] == endpoint["port"] == port["targetPort"] == "metrics"
        container_ports = {p["name"]: p["containerPort"]
                           for p in pod["spec"]["containers"][0]["ports"]}
        assert port["port"] == container_ports["metrics"], role
    # The API's own Service (behind the load balancer) is not scraped.
    assert all(not s["metadata"]["name"].endswith("-api") for s in services)
    # The target label the alert rules ask for: role, from the component label.
    assert endpoint["relabelings"] == [{
        "sourceLabels": ["__meta_kubernetes_service_label_app_kubernetes_io_component"],
        "targetLabel": "role", "action": "replace"}]
    assert {rule["labels"]["role"] for rule in alerts()
            if rule["expr"].startswith("absent(up{")} <= {
        s["metadata"]["labels"]["app.kubernetes.io/component"] for s in services}
