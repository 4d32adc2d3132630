"""The alarms, to the stack's SNS topic: the conditions of
``deploy/prometheus/sidecar-rules.yml``, each description naming its Prometheus alert and the
runbook to open.

Why they are shaped so:
- **Liveness breaches on missing data.** A dead process emits nothing: each service's
  running-task count (Container Insights) and the API's healthy hosts alarm when their data
  is missing, and so does the tailer's lag (a crashed or crash-looping tailer stops reporting
  lag, which must not read as "no lag"). A service without a running task in 3 of 5 minutes,
  not 3 in a row: a crash-looping service has a task now and then.
- **Everything else treats missing data as fine**: no request, no 5xx; an idle stream gives
  the Lambda reader no iterator age. Otherwise a quiet night would page.
- Stream gaps, stalled engines, Redis unreachable, tasks resent, dead letters waiting and
  growing, the API's p99 latency and 5xx rate, ElastiCache evictions and memory.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions

from sidecar_cdk import metrics
from sidecar_cdk.parts import StackParts

# Where the alarms' runbooks are (paths in this repository; the docs site has the same pages).
RUNBOOKS = "docs/operations/runbooks.md"
DLQ_RUNBOOK = "docs/operations/dead-letters.md#runbook-the-dlq-is-filling"
# The Prometheus alert (deploy/prometheus/sidecar-rules.yml) of each service's liveness alarm.
DOWN_ALERT = {"tailer": "SidecarTailerDown", "fulltext": "SidecarFulltextWorkersDown",
              "vectors": "SidecarVectorsWorkersDown", "api": "SidecarApiDown"}
BREACHING = cloudwatch.TreatMissingData.BREACHING


class _Alarms:
    """Builds the stack's alarms, each to its topic, and keeps them for the dashboard."""

    def __init__(self, stack: StackParts) -> None:
        self.stack = stack
        self.made: list[cloudwatch.Alarm] = []

    def alarm(self, cid: str, metric: cloudwatch.IMetric, threshold: float, *,
              summary: str, runbook: str, alert: str | None, periods: int = 3,
              datapoints: int | None = None, below: bool = False, inclusive: bool = False,
              missing: cloudwatch.TreatMissingData = cloudwatch.TreatMissingData.NOT_BREACHING,
              ) -> cloudwatch.Alarm:
        """An alarm to the topic whose description says what happened, the Prometheus alert
        of the same condition and the runbook to follow, so the page at 3 a.m. names the page
        of the docs to open."""
        if below:
            comparison = cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD
        elif inclusive:
            comparison = cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD
        else:
            comparison = cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD
        description = summary + (f" (Prometheus alert: {alert})" if alert else "") + (
            f". Runbook: {runbook}")
        alarm = cloudwatch.Alarm(
            self.stack, cid, metric=metric, threshold=threshold, evaluation_periods=periods,
            datapoints_to_alarm=datapoints, comparison_operator=comparison,
            treat_missing_data=missing, alarm_description=description)
        alarm.add_alarm_action(cw_actions.SnsAction(self.stack.topic))
        alarm.add_ok_action(cw_actions.SnsAction(self.stack.topic))
        self.made.append(alarm)
        return alarm

    def liveness(self) -> None:
        for name in self.stack.services:
            self.alarm(f"{name.capitalize()}TasksAlarm", metrics.running_tasks(self.stack, name),
                       1, summary=f"No {name} task running", alert=DOWN_ALERT[name],
                       runbook=f"{RUNBOOKS}#a-process-is-down", periods=5, datapoints=3,
                       below=True, missing=BREACHING)
        self.alarm("ApiHealthyHostsAlarm", metrics.healthy_hosts(self.stack), 1,
                   summary="The API's load balancer has no healthy target (GET /healthz fails)",
                   alert="SidecarApiDown", runbook=f"{RUNBOOKS}#a-process-is-down", periods=2,
                   below=True, missing=BREACHING)

    def reader(self) -> None:
        lag = metrics.stream_lag(self.stack)
        if self.stack.reader == "tailer":
            self.alarm("StreamLagAlarm", lag, 300,
                       summary="Stream lag over 5 min, or no tailer reports a lag at all",
                       alert="SidecarStreamLagHigh, SidecarStreamNotRead",
                       runbook=f"{RUNBOOKS}#lag-is-growing", missing=BREACHING)
            self.alarm("StreamGapAlarm",
                       metrics.sidecar_metric("sidecar_stream_gaps_total", "tailer", "Sum", 5),
                       0, summary="Stream records expired unread", alert="SidecarStreamGap",
                       runbook=f"{RUNBOOKS}#stream-gap-detected", periods=1)
            self.alarm("TasksResentAlarm",
                       metrics.sidecar_metric("sidecar_tasks_resent_total", "tailer", "Sum", 5),
                       10, summary="Over 10 tasks resent in 5 min (the broker lost them)",
                       alert="SidecarTasksResent", runbook=f"{RUNBOOKS}#redis-is-down-or-full",
                       periods=1)
            return
        self.alarm("StreamLagAlarm", lag, 300_000,
                   summary="Lambda reader's iterator age over 5 min (stream lag)",
                   alert="SidecarStreamLagHigh", runbook=f"{RUNBOOKS}#lag-is-growing")
        self.alarm("ReaderErrorsAlarm", self.stack.function.metric_errors(
            period=cdk.Duration.minutes(5)), 0, summary="Lambda reader invocations failing",
            alert=None, runbook=f"{RUNBOOKS}#lag-is-growing", periods=2)

    def pipeline(self) -> None:
        self.alarm("StalledAlarm", metrics.engines_stalled(self.stack), 1,
                   summary="An engine refuses the sidecar's credentials (401/403); batches wait",
                   alert="SidecarStalled",
                   runbook=f"{RUNBOOKS}#an-engine-refuses-the-sidecar-stalled",
                   periods=2, inclusive=True)
        self.alarm("RedisDownAlarm", metrics.redis_up(self.stack), 1,
                   summary="The broker (Redis) does not answer a sidecar role",
                   alert="SidecarRedisDown", runbook=f"{RUNBOOKS}#redis-is-down-or-full",
                   periods=2, below=True)
        self.alarm("DeadLettersAlarm",
                   metrics.sidecar_metric("sidecar_dlq_entries", "api", "Maximum"),
                   0, summary="Dead letters waiting", alert="SidecarDeadLetters",
                   runbook=DLQ_RUNBOOK, periods=1)
        growth = cloudwatch.MathExpression(
            expression="DIFF(dlq)", label="dead letters added",
            using_metrics={"dlq": metrics.sidecar_metric("sidecar_dlq_entries", "api",
                                                         "Maximum", 15)},
            period=cdk.Duration.minutes(15))
        self.alarm("DeadLettersGrowingAlarm", growth, 0,
                   summary="The dead-letter count grew in the last 15 min",
                   alert="SidecarDeadLettersGrowing", runbook=DLQ_RUNBOOK, periods=1)

    def api_and_broker(self) -> None:
        self.alarm("ApiLatencyAlarm", self.stack.alb.metrics.target_response_time(
            statistic="p99", period=cdk.Duration.minutes(5)), 1,
            summary="API p99 latency over 1 s for 10 min", alert="SidecarApiLatencyHigh",
            runbook=f"{RUNBOOKS}#the-api-is-slow-or-failing", periods=2)
        self.alarm("Api5xxAlarm", metrics.api_5xx_percent(self.stack), 5,
                   summary="API answers over 5 % 5xx", alert="SidecarApiErrors",
                   runbook=f"{RUNBOOKS}#the-api-is-slow-or-failing")
        self.alarm("RedisEvictionsAlarm", metrics.redis_metric(self.stack, "Evictions", "Sum"),
                   0, summary="The broker evicted keys (queued tasks may be lost)",
                   alert="SidecarRedisEvictions", runbook=f"{RUNBOOKS}#redis-is-down-or-full",
                   periods=1)
        self.alarm("RedisMemoryAlarm",
                   metrics.redis_metric(self.stack, "DatabaseMemoryUsagePercentage", "Maximum"),
                   80, summary="The broker uses over 80 % of its memory for 15 min",
                   alert="SidecarRedisMemoryHigh", runbook=f"{RUNBOOKS}#redis-is-down-or-full")


def add_alarms(stack: StackParts) -> list[cloudwatch.Alarm]:
    """Every alarm of the stack (the services, the reader, the ALB and the broker exist)."""
    alarms = _Alarms(stack)
    alarms.liveness()
    alarms.reader()
    alarms.pipeline()
    alarms.api_and_broker()
    return alarms.made
