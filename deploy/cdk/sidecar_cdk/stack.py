"""The sidecar next to an existing mail store: one stack, the stream read by the tailer
service (``reader="tailer"``) or by the Lambda handler (``reader="lambda"``).

This module builds what every part shares — the VPC's subnets, the key, the sidecar's table,
the bucket, the alarm topic, the broker, the task roles, the cluster and the secrets — and
hands the stack to the modules that add one job each:

- :mod:`sidecar_cdk.services`: the ECS services (tailer, workers, API behind its load
  balancer) and the one-off task definitions;
- :mod:`sidecar_cdk.lambda_reader`: the Lambda handler and its event-source mapping;
- :mod:`sidecar_cdk.alarms` and :mod:`sidecar_cdk.dashboard`, over :mod:`sidecar_cdk.metrics`.

Why the shared pieces are shaped so:

- **The sidecar's table** ``<mail table>-sidecar`` (what ``sidecar init`` would create: string
  PK/SK, on demand, TTL on ``ttl`` for the dead letters), with point-in-time recovery: it holds
  the checkpoints and leases, whose loss means re-reading the stream's retention.
- **A bucket** for table exports (``sidecar backfill --export``) and the Lambda mapping's
  on-failure records: SSE-KMS with this stack's key, public access blocked, TLS only.
- **ElastiCache Redis** (the Celery broker): two nodes, failover, encrypted at rest and in
  transit, reachable only from the sidecar's security groups.
- **A task role per role**, its policy the file ``deploy/iam/<role>.json`` (placeholders
  filled), so what is reviewed there is what is deployed.
"""

from __future__ import annotations

from typing import Any, Literal

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_elasticache as elasticache
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_secretsmanager as secretsmanager
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from sidecar_cdk import alarms, dashboard, lambda_reader, policies, services
from sidecar_cdk.config import SidecarConfig
from sidecar_cdk.metrics import QUEUE_PREFIX


class SidecarStack(cdk.Stack):
    """The whole sidecar for one mail table (see the module's docstring)."""

    # Set where the reader is the Lambda handler (``reader="lambda"``).
    function: lambda_.DockerImageFunction
    mapping: lambda_.EventSourceMapping

    def __init__(
        self, scope: Construct, construct_id: str, *, config: SidecarConfig,
        reader: Literal["tailer", "lambda"], **kwargs: Any,
    ) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
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

        # The sidecar's own table, as `sidecar init` defines it
        # (indexer/adapters/dynamodb/tables.py).
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

        self.redis_sg = self.security_group("RedisSg", "ElastiCache: sidecar clients only")
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
            self.services["tailer"] = services.service(
                self, "tailer", ["sidecar", "tail"], role="tailer", count=2, max_healthy=100,
                min_healthy=50)
        else:
            self.function, self.mapping = lambda_reader.lambda_reader(self)
        for stage in ("fulltext", "vectors"):
            self.services[stage] = services.service(
                self, stage, ["sidecar", "worker", "--role", stage, "--concurrency",
                              "4" if stage == "fulltext" else "2"],
                role="workers", count=1)
            services.scale_on_queue(self, stage, self.services[stage])
        self.services["api"], self.alb, self.target_group = services.api(self)
        services.oneoff(self, "operator", ["sidecar", "init"])
        services.oneoff(self, "backfill", ["sidecar", "backfill", "--scan"])
        self.key.grant_encrypt_decrypt(self.roles["backfill"])  # SSE-KMS export objects
        self.bucket.grant_read_write(self.roles["backfill"])
        self.alarms = alarms.add_alarms(self)
        self.dashboard = dashboard.add_dashboard(self)

        cdk.CfnOutput(self, "StateTableName", value=self.state_table.table_name)
        cdk.CfnOutput(self, "ExportBucketName", value=self.bucket.bucket_name)
        cdk.CfnOutput(self, "ClusterName", value=self.cluster.cluster_name)

    def security_group(self, cid: str, description: str) -> ec2.SecurityGroup:
        """A security group in the sidecar's VPC (no inbound rule until one is added)."""
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
