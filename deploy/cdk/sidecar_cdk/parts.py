"""What the stack's parts (:mod:`.services`, :mod:`.lambda_reader`, :mod:`.alarms`,
:mod:`.dashboard`, :mod:`.metrics`) read of the stack they are added to: a protocol that
:class:`~sidecar_cdk.stack.SidecarStack` meets, so the parts never import the stack that
imports them (no import circle, type-only ones included)."""

from __future__ import annotations

from typing import Literal, Protocol

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns

from sidecar_cdk.config import SidecarConfig


class StackParts(Protocol):
    """The stack's shared resources and helpers, as its parts use them."""

    config: SidecarConfig
    reader: Literal["tailer", "lambda"]
    vpc: ec2.IVpc
    subnets: ec2.SubnetSelection
    bucket: s3.Bucket
    topic: sns.Topic
    redis_sg: ec2.SecurityGroup
    redis_group: elasticache.CfnReplicationGroup
    sidecar_env: dict[str, str]
    roles: dict[str, iam.Role]
    cluster: ecs.Cluster
    repository: ecr.IRepository
    qdrant_key: secretsmanager.ISecret
    api_tokens: secretsmanager.ISecret
    cursor_key: secretsmanager.Secret
    services: dict[str, ecs.FargateService]
    alb: elbv2.ApplicationLoadBalancer
    target_group: elbv2.ApplicationTargetGroup
    alarms: list[cloudwatch.Alarm]
    function: lambda_.DockerImageFunction

    def security_group(self, cid: str, description: str) -> ec2.SecurityGroup: ...

    def attach_file_policy(self, role: iam.Role, file_role: str, cid: str) -> iam.CfnPolicy: ...

