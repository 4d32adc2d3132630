"""The deployment's inputs, read from CDK context.

The sidecar is added next to an existing mail store, so everything it does not own (the mail
table and its stream, the OpenSearch domain, Qdrant, the VPC, the image) is an input; a missing
required input stops the synth with the key's name instead of synthesizing a template that
points at nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol


class _Node(Protocol):
    def try_get_context(self, key: str) -> Any: ...


REQUIRED = (
    "mailTable", "mailTableStreamArn", "opensearchEndpoint", "opensearchDomainArn",
    "qdrantUrl", "qdrantApiKeySecretArn", "apiTokensSecretArn", "vpcId",
    "availabilityZones", "privateSubnetIds", "imageRepository", "imageTag",
)

# The CPU architectures Fargate and Lambda both run (the same names as context values).
ARCHITECTURES = ("x86_64", "arm64")


def _list(value: Any) -> list[str]:
    """A context list: a JSON list (cdk.json) or a comma-separated string (``-c k=a,b``)."""
    if isinstance(value, list):
        return [str(v) for v in value]
    return [v.strip() for v in str(value).split(",") if v.strip()]


@dataclass(frozen=True)
class SidecarConfig:
    """What ``cdk synth`` needs to know about the account the sidecar joins."""

    mail_table: str
    mail_table_stream_arn: str
    opensearch_endpoint: str
    opensearch_domain_arn: str
    qdrant_url: str
    qdrant_api_key_secret_arn: str
    api_tokens_secret_arn: str
    vpc_id: str
    availability_zones: list[str]
    private_subnet_ids: list[str]
    image_repository: str
    image_tag: str
    lambda_image_tag: str
    alb_ingress_cidr: str = "10.0.0.0/8"
    certificate_arn: str | None = None
    alarm_email: str | None = None
    metrics_agent_image: str = "public.ecr.aws/cloudwatch-agent/cloudwatch-agent:latest"
    redis_node_type: str = "cache.t4g.small"
    workers_max: int = 10
    # x86_64 | arm64 (Graviton): every task's and the Lambda reader's CPU architecture; the
    # images (imageTag, lambdaImageTag) must be built for it (docker buildx --platform).
    cpu_architecture: str = "x86_64"
    account: str | None = None
    region: str | None = None

    @property
    def state_table(self) -> str:
        """The sidecar's own table, named as ``sidecar init`` names it (``<table>-sidecar``)."""
        return f"{self.mail_table}-sidecar"

    @classmethod
    def from_context(cls, node: _Node) -> SidecarConfig:
        missing = [k for k in REQUIRED if node.try_get_context(k) in (None, "")]
        if missing:
            raise ValueError(
                "missing CDK context: " + ", ".join(missing)
                + " (pass -c key=value; docs/deploy/ecs-cdk.md lists them)"
            )

        def get(key: str, default: Any = None) -> Any:
            value = node.try_get_context(key)
            return default if value in (None, "") else value

        table = str(get("mailTable"))
        if table.startswith("arn:"):  # a table ARN is accepted: the name is its last part
            table = table.split(":table/", 1)[1].split("/", 1)[0]
        subnets = _list(get("privateSubnetIds"))
        zones = _list(get("availabilityZones"))
        if len(subnets) != len(zones) or len(subnets) < 2:
            raise ValueError("privateSubnetIds and availabilityZones: two or more, pairwise")
        architecture = str(get("cpuArchitecture", cls.cpu_architecture)).lower()
        if architecture not in ARCHITECTURES:
            raise ValueError(f"cpuArchitecture: one of {', '.join(ARCHITECTURES)}, not "
                             f"{architecture!r}")
        return cls(
            mail_table=table,
            mail_table_stream_arn=str(get("mailTableStreamArn")),
            opensearch_endpoint=str(get("opensearchEndpoint")),
            opensearch_domain_arn=str(get("opensearchDomainArn")),
            qdrant_url=str(get("qdrantUrl")),
            qdrant_api_key_secret_arn=str(get("qdrantApiKeySecretArn")),
            api_tokens_secret_arn=str(get("apiTokensSecretArn")),
            vpc_id=str(get("vpcId")),
            availability_zones=zones,
            private_subnet_ids=subnets,
            image_repository=str(get("imageRepository")),
            image_tag=str(get("imageTag")),
            lambda_image_tag=str(get("lambdaImageTag", f"{get('imageTag')}-lambda")),
            alb_ingress_cidr=str(get("albIngressCidr", cls.alb_ingress_cidr)),
            certificate_arn=get("certificateArn"),
            alarm_email=get("alarmEmail"),
            metrics_agent_image=str(get("metricsAgentImage", cls.metrics_agent_image)),
            redis_node_type=str(get("redisNodeType", cls.redis_node_type)),
            workers_max=int(get("workersMax", cls.workers_max)),
            cpu_architecture=architecture,
            account=get("account"),
            region=get("region"),
        )
