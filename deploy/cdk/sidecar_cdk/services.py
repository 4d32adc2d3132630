"""The ECS Fargate services, one per role, and the one-off task definitions.

Why each is shaped so:
- Each task runs with its role's policy from ``deploy/iam``, a read-only root file system
  (what the process writes goes to the task's ephemeral volumes) and a container health
  check; every task runs on the configured ``cpuArchitecture`` (x86_64, or arm64: Graviton).
- The tailer at two tasks (one reads, the lease keeps the other standing by); the full-text
  and vectors workers scaled on their queue's depth, with 120 s to stop (Celery's warm
  shutdown finishes the batch in hand; Fargate's default is 30 s, then SIGKILL, and the batch
  is redelivered and done again).
- The API behind an internal ALB whose target health check is the liveness route
  ``/healthz``, not ``/readyz``: ECS replaces tasks its load balancer marks unhealthy, so a
  check that asks the engines would turn an OpenSearch outage into API task churn;
  ``/readyz`` is for people and alarms. The metrics port is never in the target group. Worker
  and tailer security groups accept no inbound traffic at all.
- **Metrics**: a CloudWatch agent container per task scrapes the process's Prometheus port on
  localhost and writes the ``sidecar_*`` metrics to the ``MailSearchSidecar`` namespace
  (embedded metric format), so scaling and alarms read what the metrics page says.
- Task definitions for the one-off commands (``sidecar init``, ``sidecar backfill``) with the
  operator and backfill roles, run with ``aws ecs run-task``.
"""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_applicationautoscaling as appscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_logs as logs

from sidecar_cdk import metrics
from sidecar_cdk.parts import StackParts

WORKER_STOP_TIMEOUT_S = 120  # Fargate's maximum; the chart gives workers the same grace
METRICS_PORT = 9400  # SIDECAR_METRICS_PORT of the tailer and the workers
API_PORT = 8080
API_METRICS_PORT = 9108  # SIDECAR_API_METRICS_PORT (default): scraped in the task only
# (cpu units, MiB) per role: docs/results/benchmarks.md's peaks plus headroom (README "Topologies").
SIZES = {"tailer": (512, 1024), "fulltext": (1024, 2048), "vectors": (2048, 4096),
         "api": (1024, 3072), "oneoff": (1024, 4096)}


def _metrics_log_group(role: str) -> str:
    """The agent's metrics log group: per stack (two stacks, or two sidecars, never share
    one)."""
    return f"/mail-search-sidecar/{cdk.Aws.STACK_NAME}/metrics/{role}"


def metrics_agent_config(role: str, port: int) -> tuple[str, str]:
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
        "emf_processor": {"metric_namespace": metrics.NAMESPACE, "metric_declaration": [
            {"source_labels": ["job"], "label_matcher": "^sidecar$",
             "dimensions": [["queue"]], "metric_selectors": ["^sidecar_queue_depth$"]},
            {"source_labels": ["job"], "label_matcher": "^sidecar$",
             "dimensions": [["role"]], "metric_selectors": ["^sidecar_.*$"]},
        ]},
    }}, "force_flush_interval": 30}}
    return json.dumps(agent), json.dumps(scrape)


def _health_check(name: str) -> ecs.HealthCheck:
    """The container's own check: the API's liveness route, else the metrics port (the
    process serves it from its first seconds)."""
    url = (f"http://127.0.0.1:{API_PORT}/healthz" if name == "api"
           else f"http://127.0.0.1:{METRICS_PORT}/metrics")
    return ecs.HealthCheck(
        command=["CMD", "python", "-c",
                 f"import urllib.request; urllib.request.urlopen('{url}', timeout=3)"],
        interval=cdk.Duration.seconds(15), timeout=cdk.Duration.seconds(5),
        retries=4, start_period=cdk.Duration.seconds(120))


def task_definition(stack: StackParts, name: str, command: list[str], role: str, port: int,
                    size: tuple[int, int], secrets: dict[str, ecs.Secret] | None = None,
                    health: bool = True) -> ecs.FargateTaskDefinition:
    """A task of the sidecar's image running ``command`` as ``role``, with the metrics
    agent beside it when the process serves metrics on ``port`` (0: none)."""
    cpu, memory = size
    task = ecs.FargateTaskDefinition(
        stack, f"{name.capitalize()}Task", cpu=cpu, memory_limit_mib=memory,
        task_role=stack.roles[role],
        runtime_platform=ecs.RuntimePlatform(
            cpu_architecture=(ecs.CpuArchitecture.ARM64
                              if stack.config.cpu_architecture == "arm64"
                              else ecs.CpuArchitecture.X86_64),
            operating_system_family=ecs.OperatingSystemFamily.LINUX))
    # Read-only root: what the process writes (Prometheus' multiprocess files, tmp) goes
    # to the task's ephemeral volumes.
    task.add_volume(name="tmp")
    task.add_volume(name="state")
    log_group = logs.LogGroup(stack, f"{name.capitalize()}Logs",
                              retention=logs.RetentionDays.ONE_MONTH,
                              removal_policy=cdk.RemovalPolicy.DESTROY)
    env = dict(stack.sidecar_env)
    if port == METRICS_PORT:
        env["SIDECAR_METRICS_PORT"] = str(METRICS_PORT)
    container = task.add_container(
        "sidecar", image=ecs.ContainerImage.from_ecr_repository(
            stack.repository, stack.config.image_tag),
        command=command, environment=env, secrets=secrets or {},
        logging=ecs.LogDriver.aws_logs(stream_prefix=name, log_group=log_group),
        readonly_root_filesystem=True, user="10001",
        health_check=_health_check(name) if health else None,
        port_mappings=[ecs.PortMapping(container_port=API_PORT)] if name == "api" else None,
        stop_timeout=(cdk.Duration.seconds(WORKER_STOP_TIMEOUT_S)
                      if name in ("fulltext", "vectors") else None),
        essential=True)
    container.add_mount_points(
        ecs.MountPoint(container_path="/tmp", source_volume="tmp", read_only=False),  # noqa: S108
        ecs.MountPoint(container_path="/home/sidecar/.sidecar", source_volume="state",
                       read_only=False))
    if port:
        _metrics_agent(stack, task, name, port, log_group)
    return task


def _metrics_agent(stack: StackParts, task: ecs.FargateTaskDefinition, name: str, port: int,
                   log_group: logs.LogGroup) -> None:
    agent, scrape = metrics_agent_config(name, port)
    task.add_container(
        "metrics-agent", image=ecs.ContainerImage.from_registry(stack.config.metrics_agent_image),
        environment={"CW_CONFIG_CONTENT": agent, "PROMETHEUS_CONFIG_CONTENT": scrape},
        logging=ecs.LogDriver.aws_logs(stream_prefix=f"{name}-agent", log_group=log_group),
        memory_reservation_mib=128, essential=False)
    metrics_logs = logs.LogGroup(
        stack, f"{name.capitalize()}MetricsLogs", log_group_name=_metrics_log_group(name),
        retention=logs.RetentionDays.ONE_WEEK, removal_policy=cdk.RemovalPolicy.DESTROY)
    metrics_logs.grant_write(task.task_role)


def service(stack: StackParts, name: str, command: list[str], *, role: str, count: int,
            max_healthy: int = 200, min_healthy: int = 100,
            secrets: dict[str, ecs.Secret] | None = None,
            security_group: ec2.SecurityGroup | None = None) -> ecs.FargateService:
    """A long-running role as a Fargate service (reaching the broker; nothing reaching it
    unless ``security_group`` says so)."""
    port = API_METRICS_PORT if name == "api" else METRICS_PORT
    if name == "vectors":
        secrets = {"SIDECAR_QDRANT_API_KEY": ecs.Secret.from_secrets_manager(stack.qdrant_key)}
    task = task_definition(stack, name, command, role, port, SIZES[name], secrets)
    sg = security_group or stack.security_group(
        f"{name.capitalize()}Sg", f"sidecar {name}: no inbound traffic")
    stack.redis_sg.add_ingress_rule(sg, ec2.Port.tcp(6379), f"broker from {name}")
    return ecs.FargateService(
        stack, f"{name.capitalize()}Service", cluster=stack.cluster, task_definition=task,
        desired_count=count, vpc_subnets=stack.subnets, security_groups=[sg],
        assign_public_ip=False, min_healthy_percent=min_healthy,
        max_healthy_percent=max_healthy, enable_execute_command=False,
        circuit_breaker=ecs.DeploymentCircuitBreaker(enable=True, rollback=True),
        propagate_tags=ecs.PropagatedTagSource.SERVICE)


def scale_on_queue(stack: StackParts, stage: str, fargate: ecs.FargateService) -> None:
    """Step scaling on the stage's queue depth (``sidecar_queue_depth{queue}``)."""
    scaling = fargate.auto_scale_task_count(min_capacity=1,
                                            max_capacity=stack.config.workers_max)
    scaling.scale_on_metric(
        f"{stage.capitalize()}QueueDepth", metric=metrics.queue_depth(stage),
        adjustment_type=appscaling.AdjustmentType.CHANGE_IN_CAPACITY,
        scaling_steps=[
            appscaling.ScalingInterval(upper=10, change=-1),
            appscaling.ScalingInterval(lower=200, change=+1),
            appscaling.ScalingInterval(lower=2000, change=+3),
        ],
        cooldown=cdk.Duration.minutes(2))


def api(stack: StackParts) -> tuple[ecs.FargateService, elbv2.ApplicationLoadBalancer,
                                      elbv2.ApplicationTargetGroup]:
    """The API's service behind its internal load balancer (HTTPS where a certificate is
    configured), scaled on CPU."""
    cfg = stack.config
    alb_sg = stack.security_group("AlbSg", "sidecar API load balancer")
    listen = 443 if cfg.certificate_arn else 80
    alb_sg.add_ingress_rule(ec2.Peer.ipv4(cfg.alb_ingress_cidr), ec2.Port.tcp(listen),
                            "API clients")
    api_sg = stack.security_group("ApiSg", "sidecar API: from its load balancer only")
    api_sg.add_ingress_rule(alb_sg, ec2.Port.tcp(API_PORT), "load balancer")
    fargate = service(
        stack, "api", ["sidecar", "serve", "--host", "0.0.0.0", "--port", str(API_PORT)],  # noqa: S104
        role="api", count=2, security_group=api_sg, secrets={
            "SIDECAR_QDRANT_API_KEY": ecs.Secret.from_secrets_manager(stack.qdrant_key),
            "SIDECAR_API_TOKENS": ecs.Secret.from_secrets_manager(stack.api_tokens),
            "SIDECAR_CURSOR_KEY": ecs.Secret.from_secrets_manager(stack.cursor_key),
        })
    alb = elbv2.ApplicationLoadBalancer(
        stack, "Alb", vpc=stack.vpc, internet_facing=False, security_group=alb_sg,
        vpc_subnets=stack.subnets, drop_invalid_header_fields=True)
    if cfg.certificate_arn:
        listener = alb.add_listener(
            "Https", port=443, open=False, certificates=[
                elbv2.ListenerCertificate.from_arn(cfg.certificate_arn)],
            ssl_policy=elbv2.SslPolicy.RECOMMENDED_TLS)
    else:
        listener = alb.add_listener("Http", port=80, open=False)
    target_group = listener.add_targets(
        "Api", port=API_PORT, protocol=elbv2.ApplicationProtocol.HTTP,
        targets=[fargate.load_balancer_target(container_name="sidecar",
                                              container_port=API_PORT)],
        # Liveness, never /readyz: an unhealthy target is a task ECS replaces.
        health_check=elbv2.HealthCheck(path="/healthz", healthy_http_codes="200",
                                       interval=cdk.Duration.seconds(15)),
        deregistration_delay=cdk.Duration.seconds(30))
    scaling = fargate.auto_scale_task_count(min_capacity=2, max_capacity=cfg.workers_max)
    scaling.scale_on_cpu_utilization("ApiCpu", target_utilization_percent=60)
    cdk.CfnOutput(stack, "ApiUrl", value=f"{'https' if listen == 443 else 'http'}://"
                  f"{alb.load_balancer_dns_name}")
    return fargate, alb, target_group


def oneoff(stack: StackParts, role: str, command: list[str]) -> None:
    """A task definition for ``aws ecs run-task`` (init, backfill): no service."""
    task = task_definition(stack, role, command, role, 0, SIZES["oneoff"], health=False)
    cdk.CfnOutput(stack, f"{role.capitalize()}TaskDefinition", value=task.task_definition_arn)
