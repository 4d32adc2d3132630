"""The sidecar next to an existing mail store: one stack, the stream read by the tailer
service (``reader="tailer"``) or by the Lambda handler (``reader="lambda"``).

What it creates, and why each piece is shaped so:

- **The sidecar's table** ``<mail table>-sidecar`` (what ``sidecar init`` would create: string
  PK/SK, on demand, TTL on ``ttl`` for the dead letters), with point-in-time recovery: it holds
  the checkpoints and leases, whose loss means re-reading the stream's retention.
- **A bucket** for table exports (``sidecar backfill --export``) and the Lambda mapping's
  on-failure records: SSE-KMS with this stack's key, public access blocked, TLS only.
- **ElastiCache Redis** (the Celery broker): two nodes, failover, encrypted at rest and in
  transit, reachable only from the sidecar's security groups.
- **ECS Fargate services**, one per role, each task with its role's policy from
  ``deploy/iam``: the tailer at two tasks (one reads, the lease keeps the other standing by),
  the full-text and vectors workers scaled on their queue's depth (120 s to stop: the batch in
  hand finishes), the API behind an internal ALB. The target health check is the liveness route
  ``/healthz``, not ``/readyz``: ECS replaces tasks its load balancer marks unhealthy, so a
  check that asks the engines would turn an OpenSearch outage into API task churn; ``/readyz``
  is for people and alarms. The metrics port is never in the target group. Worker and tailer
  security groups accept no inbound traffic at all. Every task (and the Lambda reader) runs
  on ``cpuArchitecture`` (x86_64, or arm64 for Graviton).
- **Metrics**: a CloudWatch agent container per task scrapes the process's Prometheus port on
  localhost and writes the ``sidecar_*`` metrics to the ``MailSearchSidecar`` namespace
  (embedded metric format), so scaling and alarms read what the README's metrics table says.
- **Alarms** (to an SNS topic), the conditions of ``deploy/prometheus/sidecar-rules.yml``, each
  description naming its Prometheus alert and runbook: liveness from ECS's running-task counts
  (and the ALB's healthy hosts), which breach when the data is missing, and the tailer's lag,
  which breaches when no lag is reported at all (a dead tailer emits nothing); stream gaps,
  stalled engines, Redis unreachable, tasks resent, dead letters waiting and growing, the API's
  p99 latency and 5xx rate, ElastiCache evictions and memory. A CloudWatch dashboard with the
  alarms and the pipeline's, the API's and the broker's metrics.
- Task definitions for the one-off commands (``sidecar init``, ``sidecar backfill``) with the
  operator and backfill roles, run with ``aws ecs run-task``.
"""

from __future__ import annotations

import json
from typing import Any, Literal

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from sidecar_cdk import policies
from sidecar_cdk.config import SidecarConfig

NAMESPACE = "MailSearchSidecar"
# Where the alarms' runbooks are (paths in this repository; the docs site has the same pages).
RUNBOOKS = "docs/operations/runbooks.md"
DLQ_RUNBOOK = "docs/operations/dead-letters.md#runbook-the-dlq-is-filling"
# The Prometheus alert (deploy/prometheus/sidecar-rules.yml) of each service's liveness alarm.
DOWN_ALERT = {"tailer": "SidecarTailerDown", "fulltext": "SidecarFulltextWorkersDown",
              "vectors": "SidecarVectorsWorkersDown", "api": "SidecarApiDown"}
WORKER_STOP_TIMEOUT_S = 120  # Fargate's maximum; the chart gives workers the same grace
METRICS_PORT = 9400  # SIDECAR_METRICS_PORT of the tailer and the workers
API_PORT = 8080
API_METRICS_PORT = 9108  # SIDECAR_API_METRICS_PORT (default): scraped in the task only
QUEUE_PREFIX = "sidecar"
# (cpu units, MiB) per role: docs/results/benchmarks.md's peaks plus headroom (README "Topologies").
SIZES = {"tailer": (512, 1024), "fulltext": (1024, 2048), "vectors": (2048, 4096),
         "api": (1024, 3072), "oneoff": (1024, 4096)}


def _metrics_log_group(role: str) -> str:
    """The agent's metrics log group: per stack (two stacks, or two sidecars, never share
    one)."""
    return f"/mail-search-sidecar/{cdk.Aws.STACK_NAME}/metrics/{role}"


def _metrics_agent_config(role: str, port: int) -> tuple[str, str]:
    """The CloudWatch agent's configuration and its Prometheus scrape configuration: one
    target (this task's process on localhost), every ``sidecar_*`` metric kept with the
    ``role`` label, the queue depth also per ``queue``."""
    scrape = {
        "global": {"scrape_interval": "30s", "scrape_timeout": "10s"},
        "scrape_configs": [{
            "job_name": "sidecar",
            "static_configs": [{"targets": [f"127.0.0.1:{port}"], "labels": {"role": role}}],
        }],
    }
    agent = {"logs": {"metrics_collected": {"prometheus": {
        "log_group_name": _metrics_log_group(role),
        "prometheus_config_path": "env:PROMETHEUS_CONFIG_CONTENT",
        "emf_processor": {"metric_namespace": NAMESPACE, "metric_declaration": [
            {"source_labels": ["job"], "label_matcher": "^sidecar$",
             "dimensions": [["queue"]], "metric_selectors": ["^sidecar_queue_depth$"]},
            {"source_labels": ["job"], "label_matcher": "^sidecar$",
             "dimensions": [["role"]], "metric_selectors": ["^sidecar_.*$"]},
        ]},
    }}, "force_flush_interval": 30}}
    return json.dumps(agent), json.dumps(scrape)


class SidecarStack(cdk.Stack):
    """The whole sidecar for one mail table (see the module's docstring)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, config: SidecarConfig,
        reader: Literal["tailer", "lambda"], **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        self.alarms: list[cloudwatch.Alarm] = []
        self.reader = reader
        cfg = config

        self.vpc = ec2.Vpc.from_vpc_attributes(
            self, "Vpc", vpc_id=cfg.vpc_id, availability_zones=cfg.availability_zones,
            private_subnet_ids=cfg.private_subnet_ids,
        )
        # The route tables are not the sidecar's business (nothing here adds routes).
        cdk.Annotations.of(self.vpc).acknowledge_warning("@aws-cdk/aws-ec2:noSubnetRouteTableId")
        self.subnets = ec2.SubnetSelection(subnets=self.vpc.private_subnets)
        self.key = kms.Key(
            self, "Key", enable_key_rotation=True,
            description="mail-search-sidecar: export bucket, alarm topic, cursor key",
        )

        # The sidecar's own table, as `sidecar init` defines it (indexer/adapters/dynamodb/tables.py).
        self.state_table = dynamodb.Table(
            self, "StateTable", table_name=cfg.state_table,
            partition_key=dynamodb.Attribute(name="PK", type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name="SK", type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True),
            encryption=dynamodb.TableEncryption.AWS_MANAGED,
            time_to_live_attribute="ttl",
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.bucket = s3.Bucket(
            self, "ExportBucket", encryption=s3.BucketEncryption.KMS, encryption_key=self.key,
            bucket_key_enabled=True, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            enforce_ssl=True, versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[s3.LifecycleRule(expiration=cdk.Duration.days(90),
                                              noncurrent_version_expiration=cdk.Duration.days(7))],
            removal_policy=cdk.RemovalPolicy.RETAIN,
        )
        self.topic = sns.Topic(self, "Alarms", master_key=self.key)
        self.key.grant_encrypt_decrypt(iam.ServicePrincipal("cloudwatch.amazonaws.com"))
        if cfg.alarm_email:
            self.topic.add_subscription(subscriptions.EmailSubscription(cfg.alarm_email))

        self.redis_sg = self._security_group("RedisSg", "ElastiCache: sidecar clients only")
        self.redis_url = self._redis()
        self.sidecar_env = self._environment()
        self.roles = {role: self._role(role) for role in policies.ROLES}

        self.cluster = ecs.Cluster(self, "Cluster", vpc=self.vpc,
                                   container_insights_v2=ecs.ContainerInsights.ENABLED)
        self.repository = ecr.Repository.from_repository_name(
            self, "Image", cfg.image_repository)
        self.qdrant_key = secretsmanager.Secret.from_secret_complete_arn(
            self, "QdrantApiKey", cfg.qdrant_api_key_secret_arn)
        self.api_tokens = secretsmanager.Secret.from_secret_complete_arn(
            self, "ApiTokens", cfg.api_tokens_secret_arn)
        self.cursor_key = secretsmanager.Secret(
            self, "CursorKey", encryption_key=self.key,
            description="SIDECAR_CURSOR_KEY: the page cursors' HMAC key, one for every API task",
            generate_secret_string=secretsmanager.SecretStringGenerator(
                exclude_punctuation=True, password_length=48),
        )

        self.services: dict[str, ecs.FargateService] = {}
        if reader == "tailer":
            self._service("tailer", ["sidecar", "tail"], role="tailer", count=2,
                          max_healthy=100, min_healthy=50)
        else:
            self._lambda_reader()
        for stage in ("fulltext", "vectors"):
            service = self._service(
                stage, ["sidecar", "worker", "--role", stage, "--concurrency",
                        "4" if stage == "fulltext" else "2"],
                role="workers", count=1)
            self._scale_on_queue(stage, service)
        self._api()
        self._oneoff("operator", ["sidecar", "init"])
        self._oneoff("backfill", ["sidecar", "backfill", "--scan"])
        self.key.grant_encrypt_decrypt(self.roles["backfill"])  # SSE-KMS export objects
        self.bucket.grant_read_write(self.roles["backfill"])
        self._alarms()
        self._dashboard()

        cdk.CfnOutput(self, "StateTableName", value=self.state_table.table_name)
        cdk.CfnOutput(self, "ExportBucketName", value=self.bucket.bucket_name)
        cdk.CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)

    # --- building blocks -----------------------------------------------------------------

    def _security_group(self, cid: str, description: str) -> ec2.SecurityGroup:
        return ec2.SecurityGroup(self, cid, vpc=self.vpc, description=description,
                                 allow_all_outbound=True)

    def _redis(self) -> str:
        subnets = elasticache.CfnSubnetGroup(
            self, "RedisSubnets", description="mail-search-sidecar broker",
            subnet_ids=self.config.private_subnet_ids)
        group = elasticache.CfnReplicationGroup(
            self, "Redis", replication_group_description="mail-search-sidecar Celery broker",
            engine="redis", engine_version="7.1", cache_node_type=self.config.redis_node_type,
            num_cache_clusters=2, automatic_failover_enabled=True, multi_az_enabled=True,
            at_rest_encryption_enabled=True, transit_encryption_enabled=True,
            kms_key_id=self.key.key_arn, cache_subnet_group_name=subnets.ref,
            security_group_ids=[self.redis_sg.security_group_id],
            snapshot_retention_limit=1,
        )
        self.redis_group = group
        return (f"rediss://{group.attr_primary_end_point_address}:"
                f"{group.attr_primary_end_point_port}/0?ssl_cert_reqs=required")

    def _environment(self) -> dict[str, str]:
        """The SIDECAR_* settings every role shares (no endpoint URL: real AWS)."""
        return {
            "SIDECAR_TABLE": self.config.mail_table,
            "SIDECAR_STATE_TABLE": self.state_table.table_name,
            "SIDECAR_AWS_REGION": self.region,
            "SIDECAR_OPENSEARCH_URL": self.config.opensearch_endpoint,
            "SIDECAR_OPENSEARCH_AUTH": "sigv4",
            "SIDECAR_REDIS_URL": self.redis_url,
            "SIDECAR_QDRANT_URL": self.config.qdrant_url,
            "SIDECAR_QUEUE_PREFIX": QUEUE_PREFIX,
            "SIDECAR_EXPORT_BUCKET": self.bucket.bucket_name,
        }

    def _role(self, role: str) -> iam.Role:
        """A task role whose policy is ``deploy/iam/<role>.json`` (placeholders filled), plus
        OpenSearch's HTTP actions on the domain in a policy of its own."""
        principal: iam.IPrincipal = iam.ServicePrincipal("ecs-tasks.amazonaws.com")
        result = iam.Role(self, f"{role.capitalize()}Role", assumed_by=principal,
                          description=f"mail-search-sidecar {role}: deploy/iam/{role}.json")
        self.attach_file_policy(result, role, role)
        iam.Policy(self, f"{role.capitalize()}OpenSearch", roles=[result], statements=[
            iam.PolicyStatement(
                sid="OpenSearchHttp",
                actions=["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut",
                         "es:ESHttpDelete"],
                resources=[f"{self.config.opensearch_domain_arn}/*"])])
        return result

    def attach_file_policy(self, role: iam.Role, file_role: str, cid: str) -> iam.CfnPolicy:
        document = policies.substitute(
            policies.load(file_role), region=self.region, account=self.account,
            mail_table=self.config.mail_table, state_table=self.config.state_table,
            bucket=self.bucket.bucket_name)
        return iam.CfnPolicy(
            self, f"{cid.capitalize()}DeployIam", policy_name=f"sidecar-{file_role}",
            policy_document=document, roles=[role.role_name])

    def _task(self, name: str, command: list[str], role: str, port: int,
              size: tuple[int, int], secrets: dict[str, ecs.Secret] | None = None,
              health: bool = True) -> ecs.FargateTaskDefinition:
        cpu, memory = size
        task = ecs.FargateTaskDefinition(
            self, f"{name.capitalize()}Task", cpu=cpu, memory_limit_mib=memory,
            task_role=self.roles[role],
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=(ecs.CpuArchitecture.ARM64
                                  if self.config.cpu_architecture == "arm64"
                                  else ecs.CpuArchitecture.X86_64),
                operating_system_family=ecs.OperatingSystemFamily.LINUX))
        # Read-only root: what the process writes (Prometheus' multiprocess files, tmp) goes
        # to the task's ephemeral volumes.
        task.add_volume(name="tmp")
        task.add_volume(name="state")
        log_group = logs.LogGroup(self, f"{name.capitalize()}Logs",
                                  retention=logs.RetentionDays.ONE_MONTH,
                                  removal_policy=cdk.RemovalPolicy.DESTROY)
        env = dict(self.sidecar_env)
        if port == METRICS_PORT:
            env["SIDECAR_METRICS_PORT"] = str(METRICS_PORT)
        check = None
        if health:
            url = (f"http://127.0.0.1:{API_PORT}/healthz" if name == "api"
                   else f"http://127.0.0.1:{METRICS_PORT}/metrics")
            check = ecs.HealthCheck(
                command=["CMD", "python", "-c",
                         f"import urllib.request; urllib.request.urlopen('{url}', timeout=3)"],
                interval=cdk.Duration.seconds(15), timeout=cdk.Duration.seconds(5),
                retries=4, start_period=cdk.Duration.seconds(120))
        container = task.add_container(
            "sidecar", image=ecs.ContainerImage.from_ecr_repository(
                self.repository, self.config.image_tag),
            command=command, environment=env, secrets=secrets or {},
            logging=ecs.LogDriver.aws_logs(stream_prefix=name, log_group=log_group),
            readonly_root_filesystem=True, user="10001", health_check=check,
            port_mappings=[ecs.PortMapping(container_port=API_PORT)] if name == "api" else None,
            # Workers: Celery's warm shutdown finishes the batch in hand (Fargate's default is
            # 30 s, then SIGKILL, and the batch is redelivered and done again).
            stop_timeout=(cdk.Duration.seconds(WORKER_STOP_TIMEOUT_S)
                          if name in ("fulltext", "vectors") else None),
            essential=True)
        container.add_mount_points(
            ecs.MountPoint(container_path="/tmp", source_volume="tmp", read_only=False),  # noqa: S108
            ecs.MountPoint(container_path="/home/sidecar/.sidecar", source_volume="state",
                           read_only=False))
        if port:
            agent, scrape = _metrics_agent_config(name, port)
            task.add_container(
                "metrics-agent", image=ecs.ContainerImage.from_registry(
                    self.config.metrics_agent_image),
                environment={"CW_CONFIG_CONTENT": agent, "PROMETHEUS_CONFIG_CONTENT": scrape},
                logging=ecs.LogDriver.aws_logs(stream_prefix=f"{name}-agent",
                                               log_group=log_group),
                memory_reservation_mib=128, essential=False)
            metrics_logs = logs.LogGroup(
                self, f"{name.capitalize()}MetricsLogs",
                log_group_name=_metrics_log_group(name),
                retention=logs.RetentionDays.ONE_WEEK, removal_policy=cdk.RemovalPolicy.DESTROY)
            metrics_logs.grant_write(task.task_role)
        return task

    def _service(self, name: str, command: list[str], *, role: str, count: int,
                 max_healthy: int = 200, min_healthy: int = 100,
                 secrets: dict[str, ecs.Secret] | None = None,
                 security_group: ec2.SecurityGroup | None = None) -> ecs.FargateService:
        port = API_METRICS_PORT if name == "api" else METRICS_PORT
        if name == "vectors":
            secrets = {"SIDECAR_QDRANT_API_KEY": ecs.Secret.from_secrets_manager(self.qdrant_key)}
        size = SIZES[name]
        task = self._task(name, command, role, port, size, secrets)
        sg = security_group or self._security_group(
            f"{name.capitalize()}Sg", f"sidecar {name}: no inbound traffic")
        self.redis_sg.add_ingress_rule(sg, ec2.Port.tcp(6379), f"broker from {name}")
        service = ecs.FargateService(
            self, f"{name.capitalize()}Service", cluster=self.cluster, task_definition=task,
            desired_count=count, vpc_subnets=self.subnets, security_groups=[sg],
            assign_public_ip=False, min_healthy_percent=min_healthy,
            max_healthy_percent=max_healthy, enable_execute_command=False,
            circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
            propagate_tags=ecs.PropagatedTagSource.SERVICE)
        self.services[name] = service
        return service

    def _scale_on_queue(self, stage: str, service: ecs.FargateService) -> None:
        """Step scaling on the stage's queue depth (``sidecar_queue_depth{queue}``)."""
        scaling = service.auto_scale_task_count(min_capacity=1,
                                                max_capacity=self.config.workers_max)
        scaling.scale_on_metric(
            f"{stage.capitalize()}QueueDepth", metric=self.queue_depth(stage),
            adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
            scaling_steps=[
                appscaling.ScalingInterval(upper=10, change=-1),
                appscaling.ScalingInterval(lower=200, change=+1),
                appscaling.ScalingInterval(lower=2000, change=+3),
            ],
            cooldown=cdk.Duration.minutes(2))

    def queue_depth(self, stage: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace=NAMESPACE, metric_name="sidecar_queue_depth",
            dimensions_map={"queue": f"{QUEUE_PREFIX}.{stage}"}, statistic="Maximum",
            period=cdk.Duration.minutes(1))

    def _api(self) -> None:
        alb_sg = self._security_group("AlbSg", "sidecar API load balancer")
        listen = 443 if self.config.certificate_arn else 80
        alb_sg.add_ingress_rule(ec2.Peer.ipv4(self.config.alb_ingress_cidr),
                                ec2.Port.tcp(listen), "API clients")
        api_sg = self._security_group("ApiSg", "sidecar API: from its load balancer only")
        api_sg.add_ingress_rule(alb_sg, ec2.Port.tcp(API_PORT), "load balancer")
        service = self._service(
            "api", ["sidecar", "serve", "--host", "0.0.0.0", "--port", str(API_PORT)],  # noqa: S104
            role="api", count=2, security_group=api_sg, secrets={
                "SIDECAR_QDRANT_API_KEY": ecs.Secret.from_secrets_manager(self.qdrant_key),
                "SIDECAR_API_TOKENS": ecs.Secret.from_secrets_manager(self.api_tokens),
                "SIDECAR_CURSOR_KEY": ecs.Secret.from_secrets_manager(self.cursor_key),
            })
        self.alb = elbv2.ApplicationLoadBalancer(
            self, "Alb", vpc=self.vpc, internet_facing=False, security_group=alb_sg,
            vpc_subnets=self.subnets, drop_invalid_header_fields=True)
        if self.config.certificate_arn:
            listener = self.alb.add_listener(
                "Https", port=443, open=False, certificates=[
                    elbv2.ListenerCertificate.from_arn(self.config.certificate_arn)],
                ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS)
        else:
            listener = self.alb.add_listener("Http", port=80, open=False)
        self.target_group = listener.add_targets(
            "Api", port=API_PORT, protocol=elbv2.ApplicationProtocol.HTTP,
            targets=[service.load_balancer_target(container_name="sidecar",
                                                  container_port=API_PORT)],
            # Liveness, never /readyz: an unhealthy target is a task ECS replaces.
            health_check=elbv2.HealthCheck(path="/healthz", healthy_http_codes="200",
                                           interval=cdk.Duration.seconds(15)),
            deregistration_delay=cdk.Duration.seconds(30))
        scaling = service.auto_scale_task_count(min_capacity=2,
                                                max_capacity=self.config.workers_max)
        scaling.scale_on_cpu_utilization("ApiCpu", target_utilization_percent=60)
        cdk.CfnOutput(self, "ApiUrl", value=f"{'https' if listen == 443 else 'http'}://"
                      f"{self.alb.load_balancer_dns_name}")

    def _oneoff(self, role: str, command: list[str]) -> None:
        """A task definition for ``aws ecs run-task`` (init, backfill): no service."""
        task = self._task(role, command, role, 0, SIZES["oneoff"], health=False)
        cdk.CfnOutput(self, f"{role.capitalize()}TaskDefinition",
                      value=task.task_definition_arn)

    def _lambda_reader(self) -> None:
        """The Lambda handler reads the stream instead of the tailer: a container-image
        function (deploy/cdk/lambda/Dockerfile) and its event-source mapping."""
        cfg = self.config
        role = iam.Role(
            self, "LambdaRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
            description="mail-search-sidecar Lambda reader: deploy/iam/workers.json + stream",
            managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(
                "service-role/AWSLambdaVPCAccessExecutionRole")])
        # The handler runs the workers' full-text sync and dead-letter writes: their policy.
        self.attach_file_policy(role, "workers", "lambda")
        iam.Policy(self, "LambdaStream", roles=[role], statements=[
            iam.PolicyStatement(
                sid="MailTableStreamRead",
                actions=["dynamodb:DescribeStream", "dynamodb:GetRecords",
                         "dynamodb:GetShardIterator"],
                resources=[cfg.mail_table_stream_arn]),
            iam.PolicyStatement(sid="StreamsList", actions=["dynamodb:ListStreams"],
                                resources=["*"]),
            iam.PolicyStatement(
                sid="OpenSearchHttp",
                actions=["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut"],
                resources=[f"{cfg.opensearch_domain_arn}/*"]),
        ])
        self.lambda_role = role
        sg = self._security_group("LambdaSg", "sidecar Lambda reader: no inbound traffic")
        self.redis_sg.add_ingress_rule(sg, ec2.Port.tcp(6379), "broker from the Lambda reader")
        env = dict(self.sidecar_env)
        env["SIDECAR_BATCH_MESSAGES"] = "64"
        self.function = lambda_.DockerImageFunction(
            self, "Reader", role=role, vpc=self.vpc, vpc_subnets=self.subnets,
            security_groups=[sg], memory_size=1024, timeout=cdk.Duration.minutes(5),
            environment=env, description="mail-search-sidecar stream reader",
            architecture=(lambda_.Architecture.ARM_64 if cfg.cpu_architecture == "arm64"
                          else lambda_.Architecture.X86_64),
            code=lambda_.DockerImageCode.from_ecr(
                self.repository, tag_or_digest=cfg.lambda_image_tag))
        self.mapping = lambda_.EventSourceMapping(
            self, "StreamMapping", target=self.function,
            event_source_arn=cfg.mail_table_stream_arn,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON, batch_size=500,
            max_batching_window=cdk.Duration.seconds(1), bisect_batch_on_error=True,
            retry_attempts=10, max_record_age=cdk.Duration.days(1),
            report_batch_item_failures=True, parallelization_factor=1,
            on_failure=event_sources.S3OnFailureDestination(self.bucket))

    def _alarm(self, cid: str, metric: cloudwatch.IMetric, threshold: float, *,
               summary: str, runbook: str, alert: str | None, periods: int = 3,
               datapoints: int | None = None, below: bool = False, inclusive: bool = False,
               missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
               ) -> cloudwatch.Alarm:
        """An alarm to the topic whose description says what happened, the Prometheus alert
        of the same condition (deploy/prometheus/sidecar-rules.yml) and the runbook to follow,
        so the page at 3 a.m. names the page of the docs to open."""
        if below:
            comparison = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
        elif inclusive:
            comparison = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        else:
            comparison = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        description = summary + (f" (Prometheus alert: {alert})" if alert else "") + (
            f". Runbook: {runbook}")
        alarm = cloudwatch.Alarm(
            self, cid, metric=metric, threshold=threshold, evaluation_periods=periods,
            datapoints_to_alarm=datapoints, comparison_operator=comparison,
            treat_missing_data=missing,
            alarm_description=description)
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        alarm.add_ok_action(cw_actions.SnsAction(self.topic))
        self.alarms.append(alarm)
        return alarm

    def _sidecar_metric(self, name: str, role: str, statistic: str,
                        minutes: int = 1) -> cloudwatch.Metric:
        return cloudwatch.Metric(namespace=NAMESPACE, metric_name=name,
                                 dimensions_map={"role": role}, statistic=statistic,
                                 period=cdk.Duration.minutes(minutes))

    def _across_roles(self, name: str, statistic: str, function: str, label: str,
                      roles: list[str] | None = None) -> cloudwatch.MathExpression:
        """``function`` (MIN or MAX) of one ``sidecar_*`` metric over the roles' series: every
        process reports the gauge, each role under its own dimension."""
        roles = roles or list(self.services)
        # Ids unique per metric: one graph may show two of these expressions.
        ids = {role: f"{name.removeprefix('sidecar_')}_{role}" for role in roles}
        using: dict[str, cloudwatch.IMetric] = {
            ids[role]: self._sidecar_metric(name, role, statistic) for role in roles}
        return cloudwatch.MathExpression(
            expression=f"{function}([{', '.join(ids.values())}])", using_metrics=using,
            label=label,
            period=cdk.Duration.minutes(1))

    def running_tasks(self, name: str) -> cloudwatch.Metric:
        """Container Insights' running-task count of one service: absent (and so breaching)
        when the service has no task at all."""
        return cloudwatch.Metric(
            namespace="ECS/ContainerInsights", metric_name="RunningTaskCount",
            dimensions_map={"ClusterName": self.cluster.cluster_name,
                            "ServiceName": self.services[name].service_name},
            statistic="Minimum", period=cdk.Duration.minutes(1), label=f"{name} tasks")

    def _redis_metric(self, name: str, statistic: str) -> cloudwatch.MathExpression:
        """An ElastiCache metric, the higher of the replication group's two nodes (the
        primary moves on failover)."""
        nodes = {f"n{i}": cloudwatch.Metric(
            namespace="AWS/ElastiCache", metric_name=name,
            dimensions_map={"CacheClusterId": f"{self.redis_group.ref}-00{i}"},
            statistic=statistic, period=cdk.Duration.minutes(5)) for i in (1, 2)}
        return cloudwatch.MathExpression(expression="MAX([n1, n2])", using_metrics=dict(nodes),
                                         label=f"broker {name}", period=cdk.Duration.minutes(5))

    def _alarms(self) -> None:
        breaching = cloudwatch.TreatMissingData.BREACHING
        # Liveness: a service without a running task in 3 of 5 minutes (3 of 5, not 3 in a
        # row: a crash-looping service has a task now and then). Missing data breaches: a
        # service whose tasks are all gone has no count at all.
        for name in self.services:
            self._alarm(f"{name.capitalize()}TasksAlarm", self.running_tasks(name), 1,
                        summary=f"No {name} task running", alert=DOWN_ALERT[name],
                        runbook=f"{RUNBOOKS}#a-process-is-down", periods=5, datapoints=3,
                        below=True, missing=breaching)
        self._alarm("ApiHealthyHostsAlarm", self.target_group.metrics.healthy_host_count(
            statistic="Minimum", period=cdk.Duration.minutes(1)), 1,
            summary="The API's load balancer has no healthy target (GET /healthz fails)",
            alert="SidecarApiDown", runbook=f"{RUNBOOKS}#a-process-is-down", periods=2,
            below=True, missing=breaching)
        if self.reader == "tailer":
            # Breaches on missing data too: a crashed or crash-looping tailer stops reporting
            # lag, which must not read as "no lag".
            self._alarm("StreamLagAlarm",
                        self._sidecar_metric("sidecar_stream_lag_seconds", "tailer", "Maximum"),
                        300, summary="Stream lag over 5 min, or no tailer reports a lag at all",
                        alert="SidecarStreamLagHigh, SidecarStreamNotRead",
                        runbook=f"{RUNBOOKS}#lag-is-growing", missing=breaching)
            self._alarm("StreamGapAlarm",
                        self._sidecar_metric("sidecar_stream_gaps_total", "tailer", "Sum", 5),
                        0, summary="Stream records expired unread", alert="SidecarStreamGap",
                        runbook=f"{RUNBOOKS}#stream-gap-detected", periods=1)
            self._alarm("TasksResentAlarm",
                        self._sidecar_metric("sidecar_tasks_resent_total", "tailer", "Sum", 5),
                        10, summary="Over 10 tasks resent in 5 min (the broker lost them)",
                        alert="SidecarTasksResent", runbook=f"{RUNBOOKS}#redis-is-down-or-full",
                        periods=1)
        else:
            # No records, no invocations, no IteratorAge: an idle stream is not missing data.
            self._alarm("StreamLagAlarm", self.function.metric(
                "IteratorAge", statistic="Maximum", period=cdk.Duration.minutes(1)),
                300_000, summary="Lambda reader's iterator age over 5 min (stream lag)",
                alert="SidecarStreamLagHigh", runbook=f"{RUNBOOKS}#lag-is-growing")
            self._alarm("ReaderErrorsAlarm", self.function.metric_errors(
                period=cdk.Duration.minutes(5)), 0, summary="Lambda reader invocations failing",
                alert=None, runbook=f"{RUNBOOKS}#lag-is-growing", periods=2)
        self._alarm("StalledAlarm", self._across_roles(
            "sidecar_stalled", "Maximum", "MAX", "stalled",
            [r for r in self.services if r != "tailer"]), 1,
            summary="An engine refuses the sidecar's credentials (401/403); batches wait",
            alert="SidecarStalled", runbook=f"{RUNBOOKS}#an-engine-refuses-the-sidecar-stalled",
            periods=2, inclusive=True)
        self._alarm("RedisDownAlarm", self._across_roles(
            "sidecar_redis_up", "Minimum", "MIN", "Redis up"), 1,
            summary="The broker (Redis) does not answer a sidecar role",
            alert="SidecarRedisDown", runbook=f"{RUNBOOKS}#redis-is-down-or-full", periods=2,
            below=True)
        self._alarm("DeadLettersAlarm",
                    self._sidecar_metric("sidecar_dlq_entries", "api", "Maximum"),
                    0, summary="Dead letters waiting", alert="SidecarDeadLetters",
                    runbook=DLQ_RUNBOOK, periods=1)
        growth = cloudwatch.MathExpression(
            expression="DIFF(dlq)", label="dead letters added",
            using_metrics={"dlq": self._sidecar_metric("sidecar_dlq_entries", "api", "Maximum",
                                                       15)},
            period=cdk.Duration.minutes(15))
        self._alarm("DeadLettersGrowingAlarm", growth, 0,
                    summary="The dead-letter count grew in the last 15 min",
                    alert="SidecarDeadLettersGrowing", runbook=DLQ_RUNBOOK, periods=1)
        lb = self.alb.metrics
        self._alarm("ApiLatencyAlarm", lb.target_response_time(
            statistic="p99", period=cdk.Duration.minutes(5)), 1,
            summary="API p99 latency over 1 s for 10 min", alert="SidecarApiLatencyHigh",
            runbook=f"{RUNBOOKS}#the-api-is-slow-or-failing", periods=2)
        self._alarm("Api5xxAlarm", self.api_5xx_percent(), 5,
                    summary="API answers over 5 % 5xx", alert="SidecarApiErrors",
                    runbook=f"{RUNBOOKS}#the-api-is-slow-or-failing")
        self._alarm("RedisEvictionsAlarm", self._redis_metric("Evictions", "Sum"), 0,
                    summary="The broker evicted keys (queued tasks may be lost)",
                    alert="SidecarRedisEvictions", runbook=f"{RUNBOOKS}#redis-is-down-or-full",
                    periods=1)
        self._alarm("RedisMemoryAlarm",
                    self._redis_metric("DatabaseMemoryUsagePercentage", "Maximum"), 80,
                    summary="The broker uses over 80 % of its memory for 15 min",
                    alert="SidecarRedisMemoryHigh", runbook=f"{RUNBOOKS}#redis-is-down-or-full")

    def api_5xx_percent(self) -> cloudwatch.MathExpression:
        lb = self.alb.metrics
        return cloudwatch.MathExpression(
            expression="100 * errors / MAX([requests, 1])",
            using_metrics={
                "errors": lb.http_code_target(elbv2.HttpCodeTarget.TARGET_5XX_COUNT,
                                              statistic="Sum", period=cdk.Duration.minutes(1)),
                "requests": lb.request_count(statistic="Sum", period=cdk.Duration.minutes(1)),
            }, label="API 5xx %", period=cdk.Duration.minutes(1))

    def _dashboard(self) -> None:
        """One CloudWatch dashboard: the alarms' states first, then what the runbooks ask
        about (lag and queues, the workers' throughput, dead letters, the API, the broker)."""
        lb = self.alb.metrics
        if self.reader == "tailer":
            lag: cloudwatch.IMetric = self._sidecar_metric(
                "sidecar_stream_lag_seconds", "tailer", "Maximum")
        else:
            lag = self.function.metric("IteratorAge", statistic="Maximum",
                                       period=cdk.Duration.minutes(1))
        width = 8
        dashboard = cloudwatch.Dashboard(self, "Dashboard",
                                         default_interval=cdk.Duration.hours(3))
        dashboard.add_widgets(cloudwatch.AlarmStatusWidget(
            title="Alarms", alarms=list(self.alarms), width=24, height=4))
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Stream lag (max)", left=[lag], width=width),
            cloudwatch.GraphWidget(title="Queue depth", width=width, left=[
                self.queue_depth("fulltext"), self.queue_depth("vectors")]),
            cloudwatch.GraphWidget(title="Running tasks", width=width, left=[
                self.running_tasks(name) for name in self.services]))
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Messages synced per minute", width=width, left=[
                self._sidecar_metric("sidecar_worker_messages_total", stage, "Sum")
                for stage in ("fulltext", "vectors")]),
            cloudwatch.GraphWidget(title="Dead letters", width=width, left=[
                self._sidecar_metric("sidecar_dlq_entries", "api", "Maximum")]),
            cloudwatch.GraphWidget(title="Stalled (1) / Redis up (1)", width=width, left=[
                self._across_roles("sidecar_stalled", "Maximum", "MAX", "stalled",
                                   [r for r in self.services if r != "tailer"]),
                self._across_roles("sidecar_redis_up", "Minimum", "MIN", "Redis up")]))
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="API latency (s)", width=width, left=[
                lb.target_response_time(statistic=p, period=cdk.Duration.minutes(1))
                for p in ("p50", "p99")]),
            cloudwatch.GraphWidget(title="API requests and 5xx %", width=width,
                                   left=[lb.request_count(statistic="Sum",
                                                          period=cdk.Duration.minutes(1))],
                                   right=[self.api_5xx_percent()]),
            cloudwatch.GraphWidget(title="API healthy targets", width=width, left=[
                self.target_group.metrics.healthy_host_count(
                    statistic="Minimum", period=cdk.Duration.minutes(1))]))
        dashboard.add_widgets(
            cloudwatch.GraphWidget(title="Broker memory %", width=width, left=[
                self._redis_metric("DatabaseMemoryUsagePercentage", "Maximum")]),
            cloudwatch.GraphWidget(title="Broker evictions", width=width, left=[
                self._redis_metric("Evictions", "Sum")]),
            cloudwatch.GraphWidget(title="Broker engine CPU %", width=width, left=[
                self._redis_metric("EngineCPUUtilization", "Maximum")]))
        self.dashboard = dashboard
        cdk.CfnOutput(self, "DashboardName", value=dashboard.dashboard_name)
