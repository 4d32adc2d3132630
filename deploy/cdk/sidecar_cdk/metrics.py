"""The metrics the alarms, the dashboard and the scaling policies read, built in one place so
an alarm and the graph beside it always show the same series.

The ``sidecar_*`` metrics reach CloudWatch through each task's CloudWatch agent (embedded
metric format, namespace :data:`NAMESPACE`, one ``role`` dimension; the queue depth also per
``queue``: :func:`sidecar_cdk.services.metrics_agent_config`). The rest are AWS's own:
Container Insights' running-task counts, the ALB's, ElastiCache's.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

from sidecar_cdk.parts import StackParts

NAMESPACE = "MailSearchSidecar"
QUEUE_PREFIX = "sidecar"  # SIDECAR_QUEUE_PREFIX: <prefix>.fulltext, .vectors, .contacts


def sidecar_metric(name: str, role: str, statistic: str, minutes: int = 1) -> cloudwatch.Metric:
    """One ``sidecar_*`` metric as one role's processes report it."""
    return cloudwatch.Metric(namespace=NAMESPACE, metric_name=name,
                             dimensions_map={"role": role}, statistic=statistic,
                             period=cdk.Duration.minutes(minutes))


def across_roles(stack: StackParts, name: str, statistic: str, function: str, label: str,
                 roles: list[str] | None = None) -> cloudwatch.MathExpression:
    """``function`` (MIN or MAX) of one ``sidecar_*`` metric over the roles' series: every
    process reports the gauge, each role under its own dimension."""
    roles = roles or list(stack.services)
    # Ids unique per metric: one graph may show two of these expressions.
    ids = {role: f"{name.removeprefix('sidecar_')}_{role}" for role in roles}
    using: dict[str, cloudwatch.IMetric] = {
        ids[role]: sidecar_metric(name, role, statistic) for role in roles}
    return cloudwatch.MathExpression(
        expression=f"{function}([{', '.join(ids.values())}])", using_metrics=using,
        label=label, period=cdk.Duration.minutes(1))


def engines_stalled(stack: StackParts) -> cloudwatch.MathExpression:
    """``sidecar_stalled`` of the roles that write to or read from the engines (the tailer
    only sends tasks)."""
    return across_roles(stack, "sidecar_stalled", "Maximum", "MAX", "stalled",
                        [role for role in stack.services if role != "tailer"])


def redis_up(stack: StackParts) -> cloudwatch.MathExpression:
    """``sidecar_redis_up``, the lowest over every role: 0 when any of them lost the broker."""
    return across_roles(stack, "sidecar_redis_up", "Minimum", "MIN", "Redis up")


def running_tasks(stack: StackParts, name: str) -> cloudwatch.Metric:
    """Container Insights' running-task count of one service: absent (and so breaching)
    when the service has no task at all."""
    return cloudwatch.Metric(
        namespace="ECS/ContainerInsights", metric_name="RunningTaskCount",
        dimensions_map={"ClusterName": stack.cluster.cluster_name,
                        "ServiceName": stack.services[name].service_name},
        statistic="Minimum", period=cdk.Duration.minutes(1), label=f"{name} tasks")


def redis_metric(stack: StackParts, name: str, statistic: str) -> cloudwatch.MathExpression:
    """An ElastiCache metric, the higher of the replication group's two nodes (the primary
    moves on failover)."""
    nodes = {f"n{i}": cloudwatch.Metric(
        namespace="AWS/ElastiCache", metric_name=name,
        dimensions_map={"CacheClusterId": f"{stack.redis_group.ref}-00{i}"},
        statistic=statistic, period=cdk.Duration.minutes(5)) for i in (1, 2)}
    return cloudwatch.MathExpression(expression="MAX([n1, n2])", using_metrics=dict(nodes),
                                     label=f"broker {name}", period=cdk.Duration.minutes(5))


def api_5xx_percent(stack: StackParts) -> cloudwatch.MathExpression:
    """The share of the API's answers that were 5xx, per minute (no request: 0, not a
    division by zero)."""
    lb = stack.alb.metrics
    return cloudwatch.MathExpression(
        expression="100 * errors / MAX([requests, 1])",
        using_metrics={
            "errors": lb.http_code_target(elbv2.HttpCodeTarget.TARGET_5XX_COUNT,
                                          statistic="Sum", period=cdk.Duration.minutes(1)),
            "requests": lb.request_count(statistic="Sum", period=cdk.Duration.minutes(1)),
        }, label="API 5xx %", period=cdk.Duration.minutes(1))


def healthy_hosts(stack: StackParts) -> cloudwatch.Metric:
    """The API target group's healthy targets (its health check is ``GET /healthz``)."""
    return stack.target_group.metrics.healthy_host_count(
        statistic="Minimum", period=cdk.Duration.minutes(1))


def stream_lag(stack: StackParts) -> cloudwatch.IMetric:
    """How far the reader is behind the stream: the tailer's lag, or the Lambda reader's
    iterator age."""
    if stack.reader == "tailer":
        return sidecar_metric("sidecar_stream_lag_seconds", "tailer", "Maximum")
    return stack.function.metric("IteratorAge", statistic="Maximum",
                                 period=cdk.Duration.minutes(1))


def queue_depth(stage: str) -> cloudwatch.Metric:
    """Messages waiting on a stage's queue (``sidecar_queue_depth{queue}``)."""
    return cloudwatch.Metric(
        namespace=NAMESPACE, metric_name="sidecar_queue_depth",
        dimensions_map={"queue": f"{QUEUE_PREFIX}.{stage}"}, statistic="Maximum",
        period=cdk.Duration.minutes(1))
