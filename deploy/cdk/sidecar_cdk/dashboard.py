"""One CloudWatch dashboard per stack: the alarms' states first, then what the runbooks ask
about — lag and queues, the workers' throughput, dead letters, the API, the broker — each
graph from :mod:`sidecar_cdk.metrics`, the series its alarm reads."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch

from sidecar_cdk import metrics
from sidecar_cdk.parts import StackParts

WIDTH = 8  # three graphs to a row (a row is 24 wide)


def _graph(title: str, *left: cloudwatch.IMetric,
           right: list[cloudwatch.IMetric] | None = None) -> cloudwatch.GraphWidget:
    return cloudwatch.GraphWidget(title=title, width=WIDTH, left=list(left), right=right)


def add_dashboard(stack: StackParts) -> cloudwatch.Dashboard:
    """The dashboard (after the alarms: its first row shows them all)."""
    lb = stack.alb.metrics
    minute = cdk.Duration.minutes(1)
    dashboard = cloudwatch.Dashboard(stack, "Dashboard", default_interval=cdk.Duration.hours(3))
    dashboard.add_widgets(cloudwatch.AlarmStatusWidget(
        title="Alarms", alarms=list(stack.alarms), width=24, height=4))
    dashboard.add_widgets(
        _graph("Stream lag (max)", metrics.stream_lag(stack)),
        _graph("Queue depth", *(metrics.queue_depth(q) for q in ("fulltext", "vectors",
                                                                  "contacts"))),
        _graph("Running tasks", *(metrics.running_tasks(stack, name)
                                  for name in stack.services)))
    dashboard.add_widgets(
        _graph("Messages synced per minute", *(
            metrics.sidecar_metric("sidecar_worker_messages_total", stage, "Sum")
            for stage in ("fulltext", "vectors"))),
        _graph("Dead letters", metrics.sidecar_metric("sidecar_dlq_entries", "api", "Maximum")),
        _graph("Stalled (1) / Redis up (1)", metrics.engines_stalled(stack),
               metrics.redis_up(stack)))
    dashboard.add_widgets(
        _graph("API latency (s)", *(lb.target_response_time(statistic=p, period=minute)
                                    for p in ("p50", "p99"))),
        _graph("API requests and 5xx %", lb.request_count(statistic="Sum", period=minute),
               right=[metrics.api_5xx_percent(stack)]),
        _graph("API healthy targets", metrics.healthy_hosts(stack)))
    dashboard.add_widgets(
        _graph("Broker memory %",
               metrics.redis_metric(stack, "DatabaseMemoryUsagePercentage", "Maximum")),
        _graph("Broker evictions", metrics.redis_metric(stack, "Evictions", "Sum")),
        _graph("Broker engine CPU %",
               metrics.redis_metric(stack, "EngineCPUUtilization", "Maximum")))
    cdk.CfnOutput(stack, "DashboardName", value=dashboard.dashboard_name)
    return dashboard
