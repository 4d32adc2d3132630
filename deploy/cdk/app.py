"""The CDK app: ``cdk synth`` / ``cdk deploy`` from this folder (see docs/deploy/ecs-cdk.md).

Two stacks over one configuration (``-c key=value`` or cdk.json's ``context``):
``MailSearchSidecar`` reads the stream with the tailer service; ``MailSearchSidecarLambda``
reads it with the Lambda handler instead (never both: a shard serves two readers and the
tailer takes them). Deploy one of them.
"""

from __future__ import annotations

import aws_cdk as cdk
from sidecar_cdk.config import SidecarConfig
from sidecar_cdk.stack import SidecarStack

app = cdk.App()
config = SidecarConfig.from_context(app.node)
env = cdk.Environment(account=config.account, region=config.region) if config.account else None
SidecarStack(app, "MailSearchSidecar", config=config, reader="tailer", env=env)
SidecarStack(app, "MailSearchSidecarLambda", config=config, reader="lambda", env=env)
app.synth()
