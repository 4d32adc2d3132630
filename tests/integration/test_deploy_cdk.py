"""The CDK app (deploy/cdk) synthesizes, lints clean, deploys the policies deploy/iam holds,
and deploys into moto's CloudFormation.

Why each check:
- ``cdk synth`` through the pinned CLI (scripts/ensure-deploy-tools.sh), once per module: the
  same path as a user's ``cdk deploy``; everything below reads its templates.
- cfn-lint (0 errors) and parliament on every IAM statement (0 findings above LOW): what AWS
  would refuse, and grants wider than meant.
- The roles' policies are compared with deploy/iam/*.json, read now (not at import), so a
  policy edited there and not deployed fails here; the comparison is shown to catch a change.
- moto deploys the resource types its CloudFormation implements (the rest is dropped, each
  type listed in docs/deploy/ecs-cdk.md); the deployed resources are then described.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from aws_cdk.assertions import Match, Template

from indexer.adapters.dynamodb.tables import mail_table_spec

pytestmark = [pytest.mark.stack, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
CDK_DIR = ROOT / "deploy" / "cdk"
IAM_DIR = ROOT / "deploy" / "iam"
DOC = ROOT / "docs" / "deploy" / "ecs-cdk.md"
STACKS = ("MailSearchSidecar", "MailSearchSidecarLambda")
FILE_ROLES = {"tailer", "workers", "api", "backfill", "operator"}
REGION = "us-east-1"
ACCOUNT = "123456789012"  # moto's default account
ENDPOINT = os.environ.get("SIDECAR_AWS_ENDPOINT_URL", "http://127.0.0.1:5000")
_TABLE = re.compile(r':table/([A-Za-z0-9_.-]+)(?=$|["/])')


def client(service: str) -> Any:
    return boto3.client(service, endpoint_url=ENDPOINT, region_name=REGION,
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def deploy_tools() -> dict[str, str]:
    out = subprocess.run(["bash", str(ROOT / "scripts" / "ensure-deploy-tools.sh"),
                          "--print-env"], check=True, capture_output=True, text=True).stdout
    return dict(line.split("=", 1) for line in out.splitlines() if "=" in line)


# --- the moto network the stacks are synthesized for, and the synth --------------------


@pytest.fixture(scope="module")
def inputs() -> Iterator[dict[str, str]]:
    """A VPC, two subnets and a mail table with its stream in moto: the "existing account"
    the stacks join (moto's ELB and Lambda check that these exist)."""
    ec2 = client("ec2")
    suffix = uuid.uuid4().hex[:8]
    vpc = ec2.create_vpc(CidrBlock="10.42.0.0/16")["Vpc"]["VpcId"]
    subnets = [ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.42.{i}.0/24",
                                 AvailabilityZone=f"{REGION}{z}")["Subnet"]["SubnetId"]
               for i, z in enumerate("ab")]
    ddb = client("dynamodb")
    table = f"deploytest-{suffix}"
    ddb.create_table(**mail_table_spec(table))
    stream = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    yield {
        "suffix": suffix, "mailTable": table, "mailTableStreamArn": stream,
        "opensearchEndpoint": f"https://search-mail-{suffix}.{REGION}.es.amazonaws.com",
        "opensearchDomainArn": f"arn:aws:es:{REGION}:{ACCOUNT}:domain/mail-{suffix}",
        "qdrantUrl": "https://qdrant.internal:6333",
        "qdrantApiKeySecretArn":
            f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:qdrant-key-AbCdEf",
        "apiTokensSecretArn":
            f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret:sidecar-api-tokens-AbCdEf",
        "vpcId": vpc, "availabilityZones": f"{REGION}a,{REGION}b",
        "privateSubnetIds": ",".join(subnets), "imageRepository": "mail-search-sidecar",
        "imageTag": "0.2.0", "account": ACCOUNT, "region": REGION,
    }
    ddb.delete_table(TableName=table)
    for subnet in subnets:
        ec2.delete_subnet(SubnetId=subnet)


@pytest.fixture(scope="module")
def templates(inputs: dict[str, str], tmp_path_factory: pytest.TempPathFactory
              ) -> dict[str, dict[str, Any]]:
    """Both stacks, synthesized once by the pinned CDK CLI."""
    out = tmp_path_factory.mktemp("cdk.out")
    context = [arg for k, v in inputs.items() if k != "suffix" for arg in ("-c", f"{k}={v}")]
    started = time.monotonic()
    subprocess.run(
        [deploy_tools()["SIDECAR_CDK"], "synth", "--all", "--quiet", "--no-notices",
         "--no-version-reporting", "--app", f"{sys.executable} app.py", "-o", str(out),
         *context],
        cwd=CDK_DIR, check=True, capture_output=True, text=True,
        env={**os.environ, "CDK_DISABLE_CLI_TELEMETRY": "1"})
    print(f"cdk synth (both stacks): {time.monotonic() - started:.1f} s")
    return {name: json.loads((out / f"{name}.template.json").read_text()) for name in STACKS}


# --- resolving a template's values back to the policy files' form ---------------------


def resolve(value: Any, names: dict[str, str]) -> Any:
    """Evaluate Ref / Fn::GetAtt / Fn::Join with ``names`` (logical id, or ``id.Attr``)."""
    if isinstance(value, list):
        return [resolve(v, names) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, arg), = value.items()
        if key == "Ref":
            return names.get(arg, f"<{arg}>")
        if key == "Fn::GetAtt":
            return names.get(f"{arg[0]}.{arg[1]}", f"<{arg[0]}.{arg[1]}>")
        if key == "Fn::Join":
            return arg[0].join(str(resolve(v, names)) for v in arg[1])
    return {k: resolve(v, names) for k, v in value.items()}


def placeholder_names(template: dict[str, Any]) -> dict[str, str]:
    """The names that turn a deployed document back into deploy/iam's placeholders."""
    names = {"AWS::Region": "REGION", "AWS::AccountId": "ACCOUNT_ID", "AWS::Partition": "aws"}
    for lid, res in template["Resources"].items():
        if res["Type"] == "AWS::S3::Bucket":
            names[lid] = "EXPORT_BUCKET"
    return names


def to_file_form(document: Any, mail_table: str) -> Any:
    """Table names, the region and the account back to the files' placeholders (the stacks
    are synthesized for a literal account and region, as ``cdk deploy`` with an env is)."""
    def table(m: re.Match[str]) -> str:
        name = m.group(1)
        if name == f"{mail_table}-sidecar":
            return ":table/aecs-mail-sidecar"
        return ":table/aecs-mail" if name == mail_table else m.group(0)

    text = json.dumps(document).replace(f":{REGION}:", ":REGION:").replace(
        f":{ACCOUNT}:", ":ACCOUNT_ID:")
    return json.loads(_TABLE.sub(table, text))


def policy_differences(deployed: dict[str, Any], expected: dict[str, Any]) -> list[str]:
    """What differs between a deployed policy document and its deploy/iam file, statement
    by statement (by Sid); an empty list means they are the same policy."""
    def by_sid(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
        out = {}
        for st in doc.get("Statement", []):
            st = dict(st)
            for key in ("Action", "Resource"):
                if isinstance(st.get(key), str):
                    st[key] = [st[key]]
                if key in st:
                    st[key] = sorted(st[key])
            out[st.get("Sid", json.dumps(st, sort_keys=True))] = st
        return out

    have, want = by_sid(deployed), by_sid(expected)
    diffs = [f"statement {sid} missing from the deployed policy" for sid in want.keys() - have.keys()]
    diffs += [f"statement {sid} deployed but not in deploy/iam" for sid in have.keys() - want.keys()]
    diffs += [f"statement {sid}: deployed {have[sid]} != file {want[sid]}"
              for sid in want.keys() & have.keys() if have[sid] != want[sid]]
    if deployed.get("Version") != expected.get("Version"):
        diffs.append(f"Version {deployed.get('Version')} != {expected.get('Version')}")
    return diffs


def file_policies(template: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(logical id, file role, document) of every policy the stack names ``sidecar-<role>``."""
    found = []
    for lid, res in template["Resources"].items():
        name = res.get("Properties", {}).get("PolicyName", "")
        if res["Type"] == "AWS::IAM::Policy" and name.startswith("sidecar-"):
            found.append((lid, name.removeprefix("sidecar-"), res["Properties"]["PolicyDocument"]))
    return found


def load_file_policy(role: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((IAM_DIR / f"{role}.json").read_text(encoding="utf-8"))
    return loaded


# --- synth, lint, assertions ------------------------------------------------------------


def test_cfn_lint_has_no_errors(templates: dict[str, dict[str, Any]],
                                tmp_path: Path) -> None:
    paths = []
    for name, template in templates.items():
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps(template))
        paths.append(str(path))
    run = subprocess.run([sys.executable, "-m", "cfnlint", "--format", "parseable", *paths],
                         capture_output=True, text=True)
    errors = [line for line in run.stdout.splitlines() if ":E" in line]
    assert not run.returncode & 2 and not errors, run.stdout + run.stderr  # 2 = errors


def _example_names(template: dict[str, Any]) -> dict[str, str]:
    """Plausible values for every Ref / GetAtt, so parliament reads real-looking ARNs."""
    names = {"AWS::Region": REGION, "AWS::AccountId": ACCOUNT, "AWS::Partition": "aws",
             "AWS::URLSuffix": "amazonaws.com"}
    for lid, res in template["Resources"].items():
        service, kind = res["Type"].split("::")[1:3]
        service = {"Logs": "logs", "SecretsManager": "secretsmanager"}.get(service,
                                                                             service.lower())
        arn = f"arn:aws:{service}:{REGION}:{ACCOUNT}:{kind.lower()}/{lid.lower()}"
        if res["Type"] == "AWS::S3::Bucket":
            names[lid] = lid.lower()
            arn = f"arn:aws:s3:::{lid.lower()}"
        elif res["Type"] == "AWS::Logs::LogGroup":
            arn = f"arn:aws:logs:{REGION}:{ACCOUNT}:log-group:{lid.lower()}:*"
        elif res["Type"] == "AWS::IAM::Role":
            arn = f"arn:aws:iam::{ACCOUNT}:role/{lid.lower()}"
        elif res["Type"] == "AWS::KMS::Key":
            arn = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{uuid.uuid5(uuid.NAMESPACE_DNS, lid)}"
        names.setdefault(lid, arn)
        names[f"{lid}.Arn"] = arn
    return names


def _parliament() -> Any:
    """parliament 1.6.4 imports ``pkg_resources`` for two file paths; setuptools 81+ no
    longer ships it, so a stand-in answers resource_filename from the package folder."""
    if "pkg_resources" not in sys.modules:
        import importlib.util
        import types

        shim = types.ModuleType("pkg_resources")

        def resource_filename(package: str, name: str) -> str:
            spec = importlib.util.find_spec(package)
            assert spec is not None and spec.origin is not None
            return str(Path(spec.origin).parent / name)

        shim.resource_filename = resource_filename  # type: ignore[attr-defined]
        sys.modules["pkg_resources"] = shim
    import parliament

    return parliament


def test_iam_statements_have_no_findings_above_low(
        templates: dict[str, dict[str, Any]]) -> None:
    parliament = _parliament()
    findings, documents = [], 0
    for name, template in templates.items():
        names = _example_names(template)
        for lid, res in template["Resources"].items():
            props = res.get("Properties", {})
            docs = []
            if res["Type"] in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
                docs.append(props["PolicyDocument"])
            if res["Type"] == "AWS::IAM::Role":
                docs += [p["PolicyDocument"] for p in props.get("Policies", [])]
            for doc in docs:
                documents += 1
                policy = parliament.analyze_policy_string(json.dumps(resolve(doc, names)))
                findings += [f"{name}/{lid}: {f.severity} {f.issue} {f.detail}"
                             for f in policy.findings
                             if f.severity in ("MEDIUM", "HIGH", "CRITICAL", "INVALID")]
    assert documents >= 12
    assert not findings, "\n".join(findings)


def test_roles_deploy_the_policies_of_deploy_iam(
        templates: dict[str, dict[str, Any]], inputs: dict[str, str]) -> None:
    for name, template in templates.items():
        found = file_policies(template)
        assert {role for _, role, _ in found} == FILE_ROLES, name
        for lid, role, document in found:
            deployed = to_file_form(resolve(document, placeholder_names(template)),
                                    inputs["mailTable"])
            assert policy_differences(deployed, load_file_policy(role)) == [], f"{name}/{lid}"


def test_a_policy_that_stops_matching_is_detected(
        templates: dict[str, dict[str, Any]], inputs: dict[str, str], tmp_path: Path) -> None:
    """The comparison above fails when deploy/iam and the stack disagree: a copy of each file
    with one action dropped, or one statement added, no longer matches what is deployed."""
    template = templates["MailSearchSidecar"]
    for _, role, document in file_policies(template):
        deployed = to_file_form(resolve(document, placeholder_names(template)),
                                inputs["mailTable"])
        changed = copy.deepcopy(load_file_policy(role))
        changed["Statement"][0]["Action"] = changed["Statement"][0]["Action"][:-1] or ["x:Y"]
        (tmp_path / f"{role}.json").write_text(json.dumps(changed))
        assert policy_differences(deployed, json.loads(
            (tmp_path / f"{role}.json").read_text())), role
        extra = copy.deepcopy(load_file_policy(role))
        extra["Statement"].append({"Sid": "Extra", "Effect": "Allow",
                                   "Action": ["dynamodb:Scan"], "Resource": ["*"]})
        assert any("Extra" in d for d in policy_differences(deployed, extra)), role


def _sg_ids(template: Template, described: str) -> list[str]:
    groups = template.find_resources("AWS::EC2::SecurityGroup")
    return [lid for lid, res in groups.items()
            if described in res["Properties"]["GroupDescription"]]


@pytest.mark.parametrize("name", STACKS)
def test_assertions(templates: dict[str, dict[str, Any]], name: str) -> None:
    t = Template.from_json(templates[name])
    # No public ingress anywhere; readers and workers accept nothing, the API only its ALB.
    for lid, res in t.find_resources("AWS::EC2::SecurityGroup").items():
        for rule in res["Properties"].get("SecurityGroupIngress", []):
            assert rule.get("CidrIp") != "0.0.0.0/0" and rule.get("CidrIpv6") != "::/0", lid
    closed = _sg_ids(t, "no inbound traffic")
    assert len(closed) == 3
    for lid, res in t.find_resources("AWS::EC2::SecurityGroupIngress").items():
        target = res["Properties"]["GroupId"]["Fn::GetAtt"][0]
        assert target not in closed, lid
        if target in _sg_ids(t, "from its load balancer only"):
            assert res["Properties"]["SourceSecurityGroupId"]["Fn::GetAtt"][0] in _sg_ids(
                t, "load balancer"), lid
    t.has_resource_properties("AWS::ElasticLoadBalancingV2::LoadBalancer",
                              {"Scheme": "internal"})
    for res in t.find_resources("AWS::ECS::Service").values():
        assert res["Properties"]["NetworkConfiguration"]["AwsvpcConfiguration"][
            "AssignPublicIp"] == "DISABLED"
    # Encryption at rest (and in transit for the broker); the state table's PITR.
    t.has_resource_properties("AWS::DynamoDB::Table", {
        "TableName": Match.string_like_regexp("-sidecar$"),
        "KeySchema": [{"AttributeName": "PK", "KeyType": "HASH"},
                      {"AttributeName": "SK", "KeyType": "RANGE"}],
        "SSESpecification": {"SSEEnabled": True},
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "TimeToLiveSpecification": {"AttributeName": "ttl", "Enabled": True}})
    t.has_resource_properties("AWS::S3::Bucket", {"BucketEncryption": {
        "ServerSideEncryptionConfiguration": [Match.object_like({
            "ServerSideEncryptionByDefault": Match.object_like({"SSEAlgorithm": "aws:kms"})})]},
        "PublicAccessBlockConfiguration": {"BlockPublicAcls": True, "BlockPublicPolicy": True,
                                           "IgnorePublicAcls": True,
                                           "RestrictPublicBuckets": True}})
    t.has_resource_properties("AWS::ElastiCache::ReplicationGroup", {
        "AtRestEncryptionEnabled": True, "TransitEncryptionEnabled": True,
        "AutomaticFailoverEnabled": True})
    t.has_resource_properties("AWS::SNS::Topic", {"KmsMasterKeyId": Match.any_value()})
    t.has_resource_properties("AWS::SecretsManager::Secret", {"KmsKeyId": Match.any_value()})
    # Autoscaling of both worker pools on their queue's depth.
    steps = [res for res in t.find_resources("AWS::ApplicationAutoScaling::ScalingPolicy")
             .values() if "StepScalingPolicyConfiguration" in res["Properties"]]
    assert len(steps) == 4  # scale out and in, per pool
    depth = [res for res in t.find_resources("AWS::CloudWatch::Alarm").values()
             if res["Properties"].get("MetricName") == "sidecar_queue_depth"]
    assert {d["Properties"]["Dimensions"][0]["Value"] for d in depth} == {
        "sidecar.fulltext", "sidecar.vectors"}
    # The alarms the runbooks name.
    alarms = t.find_resources("AWS::CloudWatch::Alarm")
    metrics = {res["Properties"].get("MetricName") for res in alarms.values()}
    expressions = [m.get("Expression") for res in alarms.values()
                   for m in res["Properties"].get("Metrics", [])]
    assert {"sidecar_dlq_entries"} <= metrics
    assert any(e and "errors" in e for e in expressions)  # the API's 5xx rate
    if name == "MailSearchSidecar":
        assert {"sidecar_stream_lag_seconds", "sidecar_stream_gaps_total",
                "sidecar_tasks_resent_total"} <= metrics
        t.has_resource_properties("AWS::ECS::Service", {
            "DesiredCount": 2,
            "DeploymentConfiguration": Match.object_like({"MinimumHealthyPercent": 50})})
        t.resource_count_is("AWS::Lambda::EventSourceMapping", 0)
    else:
        assert {"IteratorAge", "Errors"} <= metrics
        t.has_resource_properties("AWS::Lambda::EventSourceMapping", {
            "FunctionResponseTypes": ["ReportBatchItemFailures"],
            "BisectBatchOnFunctionError": True, "MaximumRetryAttempts": 10,
            "StartingPosition": "TRIM_HORIZON", "ParallelizationFactor": 1,
            "DestinationConfig": {"OnFailure": {"Destination": Match.any_value()}}})
        t.has_resource_properties("AWS::Lambda::Function", {"PackageType": "Image"})
        commands = [c["Command"] for res in t.find_resources("AWS::ECS::TaskDefinition").values()
                    for c in res["Properties"]["ContainerDefinitions"] if "Command" in c]
        assert ["sidecar", "tail"] not in commands  # never both readers on one stream


# --- alarms, dashboard, health (issue 40) ----------------------------------------------


def _alarm_metrics(props: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(metric name, dimensions by name) of an alarm: its single metric, or each metric its
    math expression or labelled metric uses."""
    if "MetricName" in props:
        return [(props["MetricName"], {d["Name"]: d["Value"] for d in props.get("Dimensions", [])})]
    return [(m["MetricStat"]["Metric"]["MetricName"],
             {d["Name"]: d["Value"] for d in m["MetricStat"]["Metric"].get("Dimensions", [])})
            for m in props.get("Metrics", []) if "MetricStat" in m]


def _our_alarms(template: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The alarms the stack defines itself (not the step-scaling policies' own)."""
    return {lid: res["Properties"] for lid, res in template["Resources"].items()
            if res["Type"] == "AWS::CloudWatch::Alarm"
            and "Runbook: " in res["Properties"].get("AlarmDescription", "")}


@pytest.mark.parametrize("name", STACKS)
def test_liveness_alarms_breach_when_their_data_is_missing(
        templates: dict[str, dict[str, Any]], name: str) -> None:
    """A dead process emits nothing: each service's running-task count, the API's healthy
    hosts and (with the tailer) its lag alarm on missing data instead of going quiet."""
    template = templates[name]
    alarms = _our_alarms(template)
    services = set(_of_type(template, "AWS::ECS::Service"))
    running: dict[str, dict[str, Any]] = {}
    for props in alarms.values():
        for metric, dims in _alarm_metrics(props):
            if metric == "RunningTaskCount":
                running[dims["ServiceName"]["Fn::GetAtt"][0]] = props
    assert set(running) == services  # one per service: tailer, workers, API
    for props in running.values():
        assert props["TreatMissingData"] == "breaching"
        assert props["ComparisonOperator"] == "LessThanThreshold" and props["Threshold"] == 1
        # 3 of 5 minutes, not 3 in a row: a crash-looping service has a task now and then.
        assert (props["DatapointsToAlarm"], props["EvaluationPeriods"]) == (3, 5)
    healthy = [p for p in alarms.values()
               if any(m == "HealthyHostCount" for m, _ in _alarm_metrics(p))]
    assert len(healthy) == 1 and healthy[0]["TreatMissingData"] == "breaching"
    lag = [p for p in alarms.values() if p.get("MetricName") in (
        "sidecar_stream_lag_seconds", "IteratorAge")]
    assert len(lag) == 1
    # The tailer's lag breaches when absent; the Lambda reader's iterator age has no data on
    # an idle stream, so there missing data is not an outage.
    assert lag[0]["TreatMissingData"] == (
        "breaching" if name == "MailSearchSidecar" else "notBreaching")
    # Every other alarm the stack defines still treats missing data as fine (not a flood of
    # alarms when, say, no request came in).
    breaching = {lid for lid, p in alarms.items() if p["TreatMissingData"] == "breaching"}
    assert len(breaching) == len(services) + 1 + (name == "MailSearchSidecar")


@pytest.mark.parametrize("name", STACKS)
def test_alarms_are_the_prometheus_rules_with_runbooks(
        templates: dict[str, dict[str, Any]], name: str) -> None:
    from tests.integration.test_deploy_monitoring import alerts, runbook_problems

    alarms = _our_alarms(templates[name])
    named: set[str] = set()
    links = []
    for props in alarms.values():
        description = props["AlarmDescription"]
        links.append(description.rsplit("Runbook: ", 1)[1])
        found = re.search(r"\(Prometheus alert: ([A-Za-z, ]+)\)", description)
        if found:
            named.update(a.strip() for a in found.group(1).split(","))
    assert runbook_problems(links) == []
    every = {rule["alert"] for rule in alerts()}
    assert named <= every
    metrics = {m for props in alarms.values() for m, _ in _alarm_metrics(props)}
    assert {"RunningTaskCount", "HealthyHostCount", "sidecar_stalled", "sidecar_redis_up",
            "sidecar_dlq_entries", "TargetResponseTime", "Evictions",
            "DatabaseMemoryUsagePercentage"} <= metrics
    growth = [p for p in alarms.values() if any(
        "DIFF(" in m.get("Expression", "") for m in p.get("Metrics", []))]
    assert len(growth) == 1  # the dead letters growing, beside the waiting ones
    if name == "MailSearchSidecar":
        assert named == every  # the tailer's stack: every Prometheus condition has its alarm
    else:  # no tailer: its liveness is Lambda's, and the gap/resend counts are the tailer's
        assert every - named == {"SidecarTailerDown", "SidecarStreamNotRead",
                                 "SidecarStreamGap", "SidecarTasksResent"}
    # Each alarm notifies the topic when it fires and when it recovers.
    for lid, props in alarms.items():
        assert props["AlarmActions"] and props["OKActions"], lid


@pytest.mark.parametrize("name", STACKS)
def test_dashboard_health_check_and_stop_timeout(
        templates: dict[str, dict[str, Any]], name: str) -> None:
    from search_api.routes import router

    template = templates[name]
    t = Template.from_json(template)
    # The ALB checks the liveness route (which the API serves), never /readyz: ECS replaces
    # the tasks its load balancer marks unhealthy.
    assert "/healthz" in {getattr(r, "path", "") for r in router.routes}
    t.has_resource_properties("AWS::ElasticLoadBalancingV2::TargetGroup",
                              {"HealthCheckPath": "/healthz"})
    # Workers get 120 s to finish the batch in hand (Fargate's default is 30 s).
    stops = {}
    for res in t.find_resources("AWS::ECS::TaskDefinition").values():
        for container in res["Properties"]["ContainerDefinitions"]:
            command = container.get("Command", [])
            if command[:2] == ["sidecar", "worker"]:
                stops[command[3]] = container.get("StopTimeout")
        assert res["Properties"]["RuntimePlatform"]["CpuArchitecture"] == "X86_64"  # default
    assert stops == {"fulltext": 120, "vectors": 120}
    # One dashboard: every alarm's state, and the pipeline's, API's and broker's metrics.
    dashboards = _of_type(template, "AWS::CloudWatch::Dashboard")
    assert len(dashboards) == 1
    body = template["Resources"][dashboards[0]]["Properties"]["DashboardBody"]
    text = "".join(part if isinstance(part, str) else json.dumps(part)
                   for part in body["Fn::Join"][1])
    for lid in _our_alarms(template):
        assert f'"{lid}"' in text, f"{lid} not on the dashboard"
    for metric in ("RunningTaskCount", "sidecar_queue_depth", "sidecar_dlq_entries",
                   "TargetResponseTime", "DatabaseMemoryUsagePercentage",
                   "sidecar_stream_lag_seconds" if name == "MailSearchSidecar"
                   else "IteratorAge"):
        assert f'"{metric}"' in text, metric


def test_lambda_reader_logs_in_lambdas_json_format(
        templates: dict[str, dict[str, Any]]) -> None:
    """The Lambda reader's lines are JSON objects the platform reads as such (its level
    filter, Logs Insights' fields), application and system logs at INFO, kept a month like
    the tasks' logs (tests/unit/test_lambda_runtime_logs.py: what the handler writes then)."""
    t = Template.from_json(templates["MailSearchSidecarLambda"])
    functions = t.find_resources("AWS::Lambda::Function")
    assert len(functions) == 1
    (function,) = functions.values()
    config = function["Properties"]["LoggingConfig"]
    assert {k: config[k] for k in ("LogFormat", "ApplicationLogLevel", "SystemLogLevel")} == {
        "LogFormat": "JSON", "ApplicationLogLevel": "INFO", "SystemLogLevel": "INFO"}
    group = config["LogGroup"]["Ref"]
    assert t.to_json()["Resources"][group]["Properties"]["RetentionInDays"] == 30
    Template.from_json(templates["MailSearchSidecar"]).resource_count_is(
        "AWS::Lambda::Function", 0)


def test_arm64_option(inputs: dict[str, str]) -> None:
    """``-c cpuArchitecture=arm64``: every task and the Lambda reader on Graviton; anything
    else but the two names is refused before a template is made."""
    sys.path.insert(0, str(CDK_DIR))
    try:
        import aws_cdk as cdk
        from sidecar_cdk.config import SidecarConfig
        from sidecar_cdk.stack import SidecarStack
    finally:
        sys.path.remove(str(CDK_DIR))
    context = {k: v for k, v in inputs.items() if k != "suffix"}
    with pytest.raises(ValueError, match="cpuArchitecture"):
        SidecarConfig.from_context(cdk.App(context={**context, "cpuArchitecture": "arm"}).node)
    started = time.monotonic()
    app = cdk.App(context={**context, "cpuArchitecture": "arm64"})
    config = SidecarConfig.from_context(app.node)
    stack = SidecarStack(app, "MailSearchSidecarLambda", config=config, reader="lambda",
                         env=cdk.Environment(account=config.account, region=config.region))
    t = Template.from_stack(stack)
    platforms = {res["Properties"]["RuntimePlatform"]["CpuArchitecture"]
                 for res in t.find_resources("AWS::ECS::TaskDefinition").values()}
    assert platforms == {"ARM64"}
    t.has_resource_properties("AWS::Lambda::Function", {"Architectures": ["arm64"]})
    print(f"arm64 synth (Lambda stack, in process): {time.monotonic() - started:.1f} s")


# --- moto's CloudFormation --------------------------------------------------------------


# Types moto implements but cannot create from these templates: the dashboard's body names
# the target group's TargetGroupFullName (its healthy-hosts widget), a GetAtt moto 5.2.5's
# FakeTargetGroup does not answer (a 500 from CreateStack). Listed in the doc's dropped types.
MOTO_CANNOT_RESOLVE = {"AWS::CloudWatch::Dashboard"}


def moto_supported(template: dict[str, Any]) -> set[str]:
    """The resource types moto's CloudFormation implements (its model map, once the
    services' models are imported: the server imports them all)."""
    import importlib
    import warnings

    from moto.cloudformation import parsing

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for kind in {res["Type"].split("::")[1].lower() for res in
                     template["Resources"].values()}:
            for module in (kind, {"elasticloadbalancingv2": "elbv2"}.get(kind, kind)):
                with contextlib.suppress(ImportError):
                    importlib.import_module(f"moto.{module}.models")
    parsing.get_model_list.cache_clear()
    parsing.get_model_map.cache_clear()
    return set(parsing.get_model_map())


def reduce_template(template: dict[str, Any], supported: set[str]
                    ) -> tuple[dict[str, Any], dict[str, str]]:
    """The template less the types moto cannot create; a reference to a dropped resource
    becomes an ARN-shaped placeholder (IAM validates resources) so what refers to it still
    deploys."""
    dropped = {lid: res["Type"] for lid, res in template["Resources"].items()
               if res["Type"] not in supported}

    def placeholder(lid: str) -> str:
        service, kind = dropped[lid].split("::")[1:3]
        return f"arn:aws:{service.lower()}:{REGION}:{ACCOUNT}:{kind.lower()}/moto-dropped-{lid}"

    def fix(value: Any) -> Any:
        if isinstance(value, list):
            return [fix(v) for v in value]
        if isinstance(value, dict):
            if set(value) == {"Ref"} and value["Ref"] in dropped:
                return placeholder(value["Ref"])
            if set(value) == {"Fn::GetAtt"} and value["Fn::GetAtt"][0] in dropped:
                return placeholder(value["Fn::GetAtt"][0])
            return {k: fix(v) for k, v in value.items()}
        return value

    resources = {}
    for lid, res in template["Resources"].items():
        if lid in dropped:
            continue
        res = fix(copy.deepcopy(res))
        depends = res.get("DependsOn")
        if depends:
            res["DependsOn"] = [d for d in ([depends] if isinstance(depends, str) else depends)
                                if d not in dropped]
        resources[lid] = res
    reduced = {"AWSTemplateFormatVersion": "2010-09-09", "Resources": resources}
    return reduced, dropped


def documented_unsupported() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## What moto could not deploy", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`(AWS::[A-Za-z0-9]+::[A-Za-z0-9]+)`", section))


def documented_ignored() -> set[str]:
    text = DOC.read_text(encoding="utf-8")
    section = text.split("## What moto deploys but ignores", 1)[1].split("\n## ", 1)[0]
    return set(re.findall(r"`([A-Za-z0-9]+)`", section))


def _physical(cfn: Any, stack: str) -> dict[str, str]:
    resources = cfn.describe_stack_resources(StackName=stack)["StackResources"]
    return {r["LogicalResourceId"]: r["PhysicalResourceId"] for r in resources
            if r.get("PhysicalResourceId")}


@pytest.mark.parametrize("name", STACKS)
def test_deploys_into_moto(templates: dict[str, dict[str, Any]], inputs: dict[str, str],
                           name: str) -> None:
    template = templates[name]
    supported = moto_supported(template) - MOTO_CANNOT_RESOLVE
    reduced, dropped = reduce_template(template, supported)
    assert set(dropped.values()) <= documented_unsupported(), (
        "docs/deploy/ecs-cdk.md must list every type moto could not deploy")
    cfn = client("cloudformation")
    stack = f"{name}-{inputs['suffix']}"
    started = time.monotonic()
    try:
        cfn.create_stack(StackName=stack, TemplateBody=json.dumps(reduced),
                         Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"])
        status = cfn.describe_stacks(StackName=stack)["Stacks"][0]["StackStatus"]
        assert status == "CREATE_COMPLETE", status
        print(f"moto: {name} deployed, {len(reduced['Resources'])} resources in "
              f"{time.monotonic() - started:.1f} s; dropped: {sorted(set(dropped.values()))}")
        ids = _physical(cfn, stack)
        _check_deployed(template, ids, inputs, name)
    finally:
        _clean_up(cfn, stack, inputs)


def _of_type(template: dict[str, Any], kind: str) -> list[str]:
    return [lid for lid, res in template["Resources"].items() if res["Type"] == kind]


def _check_deployed(template: dict[str, Any], ids: dict[str, str], inputs: dict[str, str],
                    name: str) -> None:
    # The sidecar's table: keys, on demand, point-in-time recovery.
    ddb = client("dynamodb")
    state = f"{inputs['mailTable']}-sidecar"
    table = ddb.describe_table(TableName=state)["Table"]
    assert {k["AttributeName"]: k["KeyType"] for k in table["KeySchema"]} == {
        "PK": "HASH", "SK": "RANGE"}
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    backups = ddb.describe_continuous_backups(TableName=state)["ContinuousBackupsDescription"]
    pitr = backups["PointInTimeRecoveryDescription"]["PointInTimeRecoveryStatus"]
    # moto 5.2.5's CloudFormation creates the table without reading this property (the
    # template's value is asserted in test_assertions); documented as ignored.
    assert pitr == "ENABLED" or "PointInTimeRecoverySpecification" in documented_ignored()
    # The bucket: SSE-KMS and no public access; its policy (TLS only), which moto's
    # CloudFormation cannot create, applied from the template and read back.
    s3 = client("s3")
    bucket = ids[_of_type(template, "AWS::S3::Bucket")[0]]
    rules = s3.get_bucket_encryption(Bucket=bucket)["ServerSideEncryptionConfiguration"]["Rules"]
    assert rules[0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
    try:
        block = s3.get_public_access_block(Bucket=bucket)["PublicAccessBlockConfiguration"]
    except s3.exceptions.ClientError as err:  # not applied by moto's CloudFormation
        block = {"missing": "PublicAccessBlockConfiguration" in documented_ignored(),
                 "why": "NoSuchPublicAccessBlockConfiguration" in str(err)}
    assert all(block.values())
    policy_lid = _of_type(template, "AWS::S3::BucketPolicy")[0]
    names = {**{lid: ids.get(lid, lid) for lid in template["Resources"]},
             "AWS::Partition": "aws", "AWS::Region": REGION, "AWS::AccountId": ACCOUNT}
    for lid in _of_type(template, "AWS::S3::Bucket"):
        names[f"{lid}.Arn"] = f"arn:aws:s3:::{ids[lid]}"
    document = resolve(template["Resources"][policy_lid]["Properties"]["PolicyDocument"], names)
    s3.put_bucket_policy(Bucket=bucket, Policy=json.dumps(document))
    statements = json.loads(s3.get_bucket_policy(Bucket=bucket)["Policy"])["Statement"]
    assert any(st["Effect"] == "Deny" and st["Condition"] == {"Bool": {
        "aws:SecureTransport": "false"}} for st in statements)
    # Roles and their deploy/iam policies, as IAM holds them now.
    iam = client("iam")
    seen = set()
    for lid in _of_type(template, "AWS::IAM::Policy"):
        props = template["Resources"][lid]["Properties"]
        if not props["PolicyName"].startswith("sidecar-"):
            continue
        role_name = ids[props["Roles"][0]["Ref"]]
        stored = iam.get_role_policy(RoleName=role_name, PolicyName=props["PolicyName"])
        document = stored["PolicyDocument"]
        if isinstance(document, str):
            document = json.loads(document)
        file_role = props["PolicyName"].removeprefix("sidecar-")
        text = json.dumps(document).replace(f"arn:aws:s3:::{bucket}",
                                            "arn:aws:s3:::EXPORT_BUCKET")
        deployed = to_file_form(json.loads(text), inputs["mailTable"])
        assert policy_differences(deployed, load_file_policy(file_role)) == [], lid
        seen.add(file_role)
    assert seen == FILE_ROLES
    # The services (the tailer at two tasks, or none with the Lambda reader).
    ecs = client("ecs")
    cluster = ids[_of_type(template, "AWS::ECS::Cluster")[0]]
    arns = [ids[lid] for lid in _of_type(template, "AWS::ECS::Service")]
    services = ecs.describe_services(cluster=cluster, services=arns)["services"]
    assert len(services) == (4 if name == "MailSearchSidecar" else 3)
    counts = sorted(s["desiredCount"] for s in services)
    assert counts == ([1, 1, 2, 2] if name == "MailSearchSidecar" else [1, 1, 2])
    lb = client("elbv2").describe_load_balancers()["LoadBalancers"]
    assert any(b["LoadBalancerArn"] == ids[_of_type(
        template, "AWS::ElasticLoadBalancingV2::LoadBalancer")[0]] and b["Scheme"] == "internal"
        for b in lb)
    if name == "MailSearchSidecarLambda":
        _check_lambda(template, ids, inputs, bucket)


def _check_lambda(template: dict[str, Any], ids: dict[str, str], inputs: dict[str, str],
                  bucket: str) -> None:
    aws_lambda = client("lambda")
    function = ids[_of_type(template, "AWS::Lambda::Function")[0]]
    config = aws_lambda.get_function(FunctionName=function)["Configuration"]
    assert config["PackageType"] == "Image" or "PackageType" in documented_ignored()
    assert config["Timeout"] == 300
    assert config["Environment"]["Variables"]["SIDECAR_TABLE"] == inputs["mailTable"]
    assert config["VpcConfig"]["SubnetIds"]
    mappings = aws_lambda.list_event_source_mappings(FunctionName=function)[
        "EventSourceMappings"]
    assert len(mappings) == 1
    mapping = mappings[0]
    assert mapping["EventSourceArn"] == inputs["mailTableStreamArn"]
    assert mapping["BatchSize"] == 500
    # What moto keeps of the mapping's failure handling (it stores what it was given).
    got = aws_lambda.get_event_source_mapping(UUID=mapping["UUID"])
    for key, value in {"FunctionResponseTypes": ["ReportBatchItemFailures"],
                       "BisectBatchOnFunctionError": True, "MaximumRetryAttempts": 10,
                       "StartingPosition": "TRIM_HORIZON"}.items():
        if key in got:
            assert got[key] == value, key
    destination = got.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
    if destination is not None:
        assert destination == f"arn:aws:s3:::{bucket}"


def _clean_up(cfn: Any, stack: str, inputs: dict[str, str]) -> None:
    """Delete the stack and what its retain policies keep (the next stack reuses the names)."""
    try:
        ids = _physical(cfn, stack)
    except Exception:
        ids = {}
    cfn.delete_stack(StackName=stack)
    ddb, s3 = client("dynamodb"), client("s3")
    with contextlib.suppress(ddb.exceptions.ResourceNotFoundException):
        ddb.delete_table(TableName=f"{inputs['mailTable']}-sidecar")
    for physical in ids.values():
        if physical.startswith(stack.lower()[:20]) or "exportbucket" in physical.lower():
            with contextlib.suppress(Exception):  # gone already, or not a bucket
                s3.delete_bucket(Bucket=physical)
