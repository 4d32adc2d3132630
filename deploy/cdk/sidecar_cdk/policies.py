"""The roles' policies, read from ``deploy/iam/*.json`` at synth time.

Those files are what ``tests/integration/test_iam_policies.py`` proves against every AWS call
the sidecar makes, so the deployed policy must be that file and nothing re-typed: the only
change is the placeholders (``REGION``, ``ACCOUNT_ID``, the table names ``aecs-mail`` and
``aecs-mail-sidecar``, ``EXPORT_BUCKET``) replaced by this deployment's values. Whatever else a
role needs (image pull, logs, KMS, OpenSearch's ``es:ESHttp*``) goes in separate policies, so
the file's policy stays recognisable in the template (``tests/integration/test_deploy_cdk.py``
compares them).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

IAM_DIR = Path(__file__).resolve().parents[2] / "iam"
ROLES = ("tailer", "workers", "api", "backfill", "operator")
_TABLE = re.compile(r":table/(aecs-mail-sidecar|aecs-mail)(?=$|/)")


def load(role: str) -> dict[str, Any]:
    """The role's policy document exactly as the repository holds it."""
    document: dict[str, Any] = json.loads((IAM_DIR / f"{role}.json").read_text(encoding="utf-8"))
    return document


def substitute(
    document: Any, *, region: str, account: str, mail_table: str, state_table: str, bucket: str
) -> Any:
    """The document with its placeholders replaced (strings may be CDK tokens)."""

    def text(value: str) -> str:
        value = _TABLE.sub(
            lambda m: f":table/{state_table if m.group(1).endswith('-sidecar') else mail_table}",
            value,
        )
        value = value.replace(":REGION:", f":{region}:").replace(":ACCOUNT_ID:", f":{account}:")
        return value.replace("arn:aws:s3:::EXPORT_BUCKET", f"arn:aws:s3:::{bucket}")

    if isinstance(document, dict):
        return {k: substitute(v, region=region, account=account, mail_table=mail_table,
                              state_table=state_table, bucket=bucket) for k, v in document.items()}
    if isinstance(document, list):
        return [substitute(v, region=region, account=account, mail_table=mail_table,
                           state_table=state_table, bucket=bucket) for v in document]
    return text(document) if isinstance(document, str) else document
