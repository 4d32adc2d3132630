"""The Lambda handler reads the stream instead of the tailer (``reader="lambda"``): a
container-image function (``deploy/cdk/lambda/Dockerfile``) and its event-source mapping.

Why it is shaped so:
- Its role carries ``deploy/iam/workers.json`` (the handler runs the workers' full-text sync
  and dead-letter writes) plus the stream reads and OpenSearch's HTTP actions.
- The mapping reports partial batch failures, bisects a failing batch, retries 10 times and
  sends what still fails to the export bucket: one poison record never stalls the shard.
- **Logs in Lambda's JSON log format**, application and system logs at INFO: every line the
  function writes is a JSON object (the platform's START/END/REPORT lines too), so one log
  pipeline reads the sidecar's processes alike, Lambda's level filter applies, and
  CloudWatch Logs Insights finds the fields. The handler keeps the runtime's JSON formatter
  in that format (it frames each line with its level) and adds the sidecar's context fields
  (:func:`indexer.logs.configure_lambda`). A month's retention, as the ECS tasks' logs.
"""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as event_sources
from aws_cdk import aws_logs as logs

from sidecar_cdk.parts import StackParts


def _role(stack: StackParts) -> iam.Role:
    cfg = stack.config
    role = iam.Role(
        stack, "LambdaRole", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
        description="mail-search-sidecar Lambda reader: deploy/iam/workers.json + stream",
        managed_policies=[iam.ManagedPolicy.from_aws_managed_policy_name(
            "service-role/AWSLambdaVPCAccessExecutionRole")])
    # The handler runs the workers' full-text sync and dead-letter writes: their policy.
    stack.attach_file_policy(role, "workers", "lambda")
    iam.Policy(stack, "LambdaStream", roles=[role], statements=[
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
    return role


def lambda_reader(stack: StackParts) -> tuple[lambda_.DockerImageFunction,
                                                lambda_.EventSourceMapping]:
    """The function and its mapping on the mail table's stream."""
    cfg = stack.config
    role = _role(stack)
    sg = stack.security_group("LambdaSg", "sidecar Lambda reader: no inbound traffic")
    stack.redis_sg.add_ingress_rule(sg, ec2.Port.tcp(6379), "broker from the Lambda reader")
    env = dict(stack.sidecar_env)
    env["SIDECAR_BATCH_MESSAGES"] = "64"
    log_group = logs.LogGroup(stack, "ReaderLogs", retention=logs.RetentionDays.ONE_MONTH,
                              removal_policy=cdk.RemovalPolicy.DESTROY)
    function = lambda_.DockerImageFunction(
        stack, "Reader", role=role, vpc=stack.vpc, vpc_subnets=stack.subnets,
        security_groups=[sg], memory_size=1024, timeout=cdk.Duration.minutes(5),
        environment=env, description="mail-search-sidecar stream reader",
        architecture=(lambda_.Architecture.ARM_64 if cfg.cpu_architecture == "arm64"
                      else lambda_.Architecture.X86_64),
        logging_format=lambda_.LoggingFormat.JSON,
        application_log_level_v2=lambda_.ApplicationLogLevel.INFO,
        system_log_level_v2=lambda_.SystemLogLevel.INFO,
        log_group=log_group,
        code=lambda_.DockerImageCode.from_ecr(stack.repository,
                                              tag_or_digest=cfg.lambda_image_tag))
    mapping = lambda_.EventSourceMapping(
        stack, "StreamMapping", target=function,
        event_source_arn=cfg.mail_table_stream_arn,
        starting_position=lambda_.StartingPosition.TRIM_HORIZON, batch_size=500,
        max_batching_window=cdk.Duration.seconds(1), bisect_batch_on_error=True,
        retry_attempts=10, max_record_age=cdk.Duration.days(1),
        report_batch_item_failures=True, parallelization_factor=1,
        on_failure=event_sources.S3OnFailureDestination(stack.bucket))
    return function, mapping
