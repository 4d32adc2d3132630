"""Typed settings, read once per process from ``SIDECAR_*`` environment variables.

Every command builds its clients from one :class:`Settings`, so two stacks (or two tables)
can coexist on one machine by exporting different variables.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, SecretStr, StringConstraints, ValidationError, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from indexer.core.recipes import DEFAULT_RECIPE, Recipe


class Settings(BaseSettings):
    """All knobs of the sidecar. Local defaults match ``sidecar stack up``."""

    model_config = SettingsConfigDict(env_prefix="SIDECAR_", extra="ignore", frozen=True)

    # The user's mail store.
    table: str = Field(default="aecs-mail", description="The mail store's DynamoDB table.")
    state_table: str = Field(
        default="",
        description="Sidecar-owned table (participants, checkpoints); '' = '<table>-sidecar'.",
    )
    aws_endpoint_url: str | None = Field(
        default=None, description="moto locally; unset means real AWS."
    )
    aws_region: str | None = Field(
        default=None,
        description="Region; unset = AWS_REGION, else boto3's chain (AWS_DEFAULT_REGION, profile).",
    )
    dynamodb_endpoint_url: str | None = Field(
        default=None, description="DynamoDB endpoint (e.g. a VPC endpoint); else aws_endpoint_url."
    )
    dynamodbstreams_endpoint_url: str | None = Field(
        default=None, description="DynamoDB Streams endpoint; else aws_endpoint_url."
    )
    s3_endpoint_url: str | None = Field(
        default=None, description="S3 endpoint (exports, ingest); else aws_endpoint_url."
    )
    aws_role_arn: str | None = Field(
        default=None,
        pattern=r"^arn:aws[a-z-]*:iam::\d{12}:role/[A-Za-z0-9_+=,.@/-]{1,512}$",
        description="A role to assume for every AWS call (DynamoDB, Streams, S3, OpenSearch "
        "SigV4), e.g. the mail store's account; the default chain's credentials assume it.",
    )
    aws_role_external_id: SecretStr | None = Field(
        default=None, description="The ExternalId the role's trust policy requires; secret."
    )
    aws_role_session_name: str = Field(
        default="mail-search-sidecar", pattern=r"^[A-Za-z0-9_+=,.@-]{2,64}$",
        description="RoleSessionName of the assumed role (shows in CloudTrail).",
    )
    aws_call_log: Path | None = Field(
        default=None,
        description="Append each distinct AWS call (role, service, operation) here (IAM audit).",
    )

    # Engines.
    opensearch_url: str = Field(
        default="http://127.0.0.1:9200",
        description="OpenSearch endpoint, or several nodes of one cluster as a comma list "
        "(http://a:9200,http://b:9200): the client spreads requests over them and retries "
        "another node when one is unreachable. Production: every data/coordinating node, or "
        "one load-balanced endpoint (a domain).",
    )
    opensearch_shards: int = Field(
        default=1, ge=1, le=1024,
        description="number_of_shards of each new index (template, reindex targets); a change "
        "applies to the next `sidecar reindex`. Production: about one shard per 10-50 GB of "
        "index, at least one per data node that should share the writes.",
    )
    opensearch_replicas: int = Field(
        default=0, ge=0, le=16,
        description="number_of_replicas of each new index, applied to existing ones too when "
        "the template is put. Keep 0 on one node (a replica never allocates there: the index "
        "stays yellow). Production: 1 (2+ data nodes): a data node lost keeps every shard "
        "searchable and writable.",
    )
    opensearch_wait_for_active_shards: str = Field(
        default="1", pattern=r"^(all|[1-9][0-9]*)$",
        description="Copies of a shard that must be active before a bulk write proceeds (1 = "
        "the primary; all = every copy). Production: 1 with replicas 1 (writes continue while "
        "a node is down; every in-sync copy still gets each write before it is acknowledged); "
        "2 refuses writes (retried as transient) while only one copy is left.",
    )
    opensearch_refresh_interval: str = Field(
        default="500ms", pattern=r"^[1-9][0-9]*(ms|s)$",
        description="How often new writes become searchable: index.refresh_interval of each "
        "new index, applied to existing ones too when the template is put (set it alike on "
        "every role). Each refresh makes a segment of what arrived since the last: shorter is "
        "fresher and leaves more small segments to merge. 500ms halves the wait for the next "
        "refresh against OpenSearch's 1s at no bulk throughput measured (docs/results/runs/).",
    )
    opensearch_index: str = Field(
        default="mail", description="Alias readers use; also the index-family prefix."
    )
    opensearch_auth: Literal["none", "basic", "sigv4"] = Field(
        default="none", description="none | basic (username/password) | sigv4 (AWS IAM)."
    )
    opensearch_aws_service: Literal["es", "aoss"] = Field(
        default="es", description="SigV4 service: es = a Service domain, aoss = Serverless."
    )
    opensearch_visible_timeout_s: float = Field(
        default=30.0, gt=0, le=600,
        description="aoss only: how long a refresh waits for acknowledged writes to become "
        "searchable (collections have no _refresh) before failing as transient.",
    )
    opensearch_username: str | None = Field(default=None, description="Basic auth user.")
    opensearch_password: SecretStr | None = Field(
        default=None, description="Basic auth; never logged."
    )
    opensearch_verify_certs: bool = Field(default=True, description="Verify the TLS certificate.")
    opensearch_ca_certs: Path | None = Field(default=None, description="CA bundle (a private CA).")
    opensearch_pool_size: int = Field(
        default=32, ge=1, le=512,
        description="Connections kept open to each OpenSearch host (size it to the process's "
        "concurrency: the API's request threads, a worker's bulk threads).",
    )
    search_timeout_ms: int = Field(
        default=2000, ge=100, le=60_000,
        description="Time budget of one search, enforced by OpenSearch (timeout, then task "
        "cancellation); a search over it answers 400 naming the budget, and is never retried.",
    )
    api_expensive_per_token: int = Field(
        default=1, ge=1, le=64,
        description="Expensive searches (>= 100 engine clauses: many prefixes or words) one "
        "caller may run at once; more answer 429 with Retry-After.",
    )
    api_expensive_per_second: float = Field(
        default=2.0, gt=0, le=1000,
        description="Expensive searches one caller may start per second on average (a burst "
        "of twice that); more answer 429 with Retry-After.",
    )
    api_expensive_in_flight: int = Field(
        default=4, ge=1, le=256,
        description="Expensive searches (every caller's together: many prefixes or words, "
        "collapse over many words, similar) one API process runs at once; more answer 429.",
    )
    api_requests_per_second: float = Field(
        default=100.0, gt=0, le=100_000,
        description="Requests one caller (its token, or a JWT's issuer and subject) may make "
        "per second on average to one API process (a burst of twice that); more answer 429.",
    )
    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Celery broker and results (dead letters are in the sidecar's table): "
        "one server `redis://host:6379/0` (or an ElastiCache replication group's primary "
        "endpoint, whose DNS name follows a failover; `rediss://` for TLS), or Redis "
        "Sentinel as `sentinel://host1:26379;sentinel://host2:26379/0` (every Sentinel, "
        "`;`-separated, the database number once) with `SIDECAR_REDIS_SENTINEL_MASTER`.",
    )
    redis_sentinel_master: str | None = Field(
        default=None,
        description="With a `sentinel://` URL: the name of the master the Sentinels monitor "
        "(their `sentinel monitor <name> ...`); required there, unused otherwise.",
    )
    redis_sentinel_password: SecretStr | None = Field(
        default=None,
        description="With a `sentinel://` URL: the password of the Sentinels themselves "
        "(`requirepass` in their configuration); the master's goes in the URL "
        "(`sentinel://:password@host:26379`).",
    )
    qdrant_url: str | None = Field(default=None, description="A Qdrant server; unset = embedded.")
    qdrant_path: Path = Field(default=Path(".sidecar/qdrant"), description="Embedded Qdrant store.")
    qdrant_collection: str = Field(default="mail", description="Prefix of the collection alias.")
    qdrant_shard_number: int | None = Field(
        default=None, ge=1, description="Shards of each new collection (a cluster); unset = 1."
    )
    qdrant_replication_factor: int | None = Field(
        default=None, ge=1,
        description="Copies of each shard (a cluster); unset = 1. Production: 2 on 3+ nodes "
        "(a node lost keeps every shard readable and writable).",
    )
    qdrant_write_consistency_factor: int | None = Field(
        default=None, ge=1,
        description="Replicas that must acknowledge a write (a cluster); unset = 1. "
        "Production: 1 with replication 2 (writes continue while a node is down); the embedded "
        "store ignores it, like shards and replication.",
    )
    qdrant_read_consistency: str | None = Field(
        default=None, pattern=r"^(all|majority|quorum|[1-9][0-9]*)$",
        description="Replicas the API's vector searches ask (all, majority, quorum or a "
        "number); unset = 1, the server's default: the fastest, and it keeps answering while a "
        "replica is down. Production: unset, or majority when reads must see every write.",
    )
    qdrant_api_key: SecretStr | None = Field(
        default=None, description="API key of a secured Qdrant server (or Qdrant Cloud); secret."
    )
    qdrant_prefer_grpc: bool = Field(
        default=False, description="Talk to the Qdrant server over gRPC (its gRPC port) not HTTP."
    )
    qdrant_grpc_port: int = Field(
        default=6334, ge=1, le=65535, description="The server's gRPC port."
    )
    qdrant_optimize_after: int = Field(
        default=20_000, ge=1,
        description="Embedded store: optimize a collection in the background after this many "
        "points were written to it.",
    )

    # Local stack.
    state_dir: Path = Field(
        default=Path(".sidecar"),
        description="Local stack only (tooling): logs, pid files, data.",
    )
    moto_port: int = Field(default=5000, description="Local stack only: the moto server's port.")
    opensearch_heap: str = Field(
        default="512m", description="Local stack only: the OpenSearch node's heap."
    )

    # Pipeline.
    queue_prefix: str = Field(
        default="sidecar",
        description="Queues <prefix>.fulltext and <prefix>.vectors; the dead letters' "
        "partition DLQ#<prefix>.",
    )
    batch_messages: int = Field(default=64, ge=1, le=500, description="Messages per task.")
    vectors_nice: int = Field(
        default=10, ge=0, le=19,
        description="CPU priority steps a worker consuming the vectors queue gives up (nice), "
        "so full-text tasks on a shared host run before embedding; 0 keeps normal priority.",
    )
    first_read: Literal["eventual", "strong"] = Field(
        default="eventual",
        description="A worker's first read of a message's mail items: eventual costs half "
        "the read units; the strong read after each write still catches a stale one, at one "
        "more round (sidecar_sync_rewritten_total counts them). A backfill's is always "
        "eventual.",
    )
    max_retries: int = Field(
        default=8, ge=0,
        description="Retries of a batch failing unexpectedly before it is dead-lettered.",
    )
    retry_backoff_max_s: int = Field(
        default=120, description="Cap of the jittered backoff between retries, in seconds."
    )
    # Transient failures (an engine down) are retried this long before dead-lettering.
    transient_retry_budget_s: int = Field(
        default=3600, ge=0,
        description="How long a batch failing transiently (an engine down) is retried, in "
        "seconds; configuration errors (401/403) are retried without a deadline.",
    )
    visibility_timeout_s: int = Field(
        default=900, description="Seconds before a dead worker's unacked task is redelivered."
    )
    embed_batch_size: int = Field(default=32, ge=1, description="Texts per encoder batch.")
    embed_max_tokens: int = Field(
        default=256, ge=16, le=512,
        description="Encoder truncation; named in the collection (a change is a reindex).",
    )
    embed_threads: int = Field(default=2, ge=1, description="Threads of the encoder.")
    embed_dtype: Literal["auto", "float32", "bfloat16"] = Field(
        default="auto",
        description="Model precision; auto = bfloat16 where the CPU has native bfloat16.",
    )
    embed_device: str = Field(
        default="cpu",
        pattern=r"^(cpu|cuda(:\d+)?|mps)$",
        description="torch device of the encoder (cpu, cuda, cuda:N, mps); not cpu needs "
        "SIDECAR_EMBED_RUNTIME=torch.",
    )
    embed_runtime: Literal["onnx", "torch"] = Field(
        default="onnx",
        description="The encoder: onnx = ONNX Runtime, no torch (the [vectors] extra); torch = "
        "sentence-transformers (the [torch] extra: GPUs, bfloat16, models without an ONNX "
        "graph). Same vectors, so no reindex.",
    )
    embed_precision: Literal["int8", "float32"] = Field(
        default="float32",
        description="onnx runtime: int8 = the int8 graph quantized from the same weights at "
        "export (docs/encoder.md); named in the collection (-int8), so a change is a "
        "`sidecar reindex --vectors`.",
    )
    embed_onnx_dir: Path | None = Field(
        default=None,
        description="Where the exported ONNX graphs are (`sidecar export-onnx`); unset = "
        "~/.cache/mail-search-sidecar/onnx (XDG_CACHE_HOME).",
    )

    # Exports the sidecar requests itself (`sidecar backfill --export`).
    export_bucket: str | None = Field(
        default=None, description="S3 bucket DynamoDB exports the table to (`--bucket`)."
    )
    export_prefix: str = Field(
        default="sidecar-exports", description="Key prefix of those exports in the bucket."
    )
    embed_model: str = Field(
        default="",
        description="A sentence-transformers model directory or installed model package; "
        "empty = the shipped all-MiniLM-L6-v2. Changing it is a `sidecar reindex --vectors`.",
    )
    embed_models: tuple[str, ...] = Field(
        default=(),
        description="Other models this process may embed with (a change of model in progress).",
    )
    embed_recipe: Recipe = Field(
        default=DEFAULT_RECIPE,
        description="The embedded text of a message (forai, or subject-forai: the stripped "
        "subject, a blank line, forai). Changing it is a `sidecar reindex --vectors`.",
    )

    # Metrics (Prometheus).
    metrics_port: int = Field(
        default=0,
        ge=0,
        le=65535,
        description="Port of `sidecar tail`'s and `sidecar worker`'s /metrics; 0 = off. "
        "The API serves /metrics on its own port.",
    )
    metrics_host: str = Field(default="127.0.0.1", description="Address the metrics port binds.")

    # Logs (indexer/logs.py reads the variable itself, so logging works before settings load).
    log_level: Annotated[str, StringConstraints(
        strip_whitespace=True, to_lower=True,
        pattern=r"(?i)^(debug|info|warning|error|critical)?$")] = Field(
        default="",
        description="Level of every command's JSON logs (also `sidecar --log-level`); '' = "
        "each command's default (info for tail, serve and workers, warning for the rest).",
    )

    progress_interval_s: float = Field(
        default=15.0, gt=0, le=3600,
        description="Outside a terminal (an ECS task, a Kubernetes Job), seconds between two "
        "JSON progress lines of `backfill`, `ingest`, `reindex` and export polling (done, "
        "total, rate, ETA); in a terminal a progress bar is drawn instead.",
    )

    # API.
    api_host: str = Field(
        default="127.0.0.1", description="Address `sidecar serve` listens on (`--host`)."
    )
    api_port: int = Field(default=8080, description="Port `sidecar serve` listens on (`--port`).")
    api_tokens: str | None = Field(
        default=None,
        description="JSON object: hex SHA-256 of a bearer token -> list of readable mailbox ids.",
    )
    api_tokens_file: Path | None = Field(default=None, description="A file holding that JSON.")
    env: str = Field(default="prod", description="'dev' enables the documented dev token.")
    dev_mailboxes: tuple[str, ...] = Field(
        default=("demo@example.com",), description="Mailboxes the dev token may read."
    )
    # Issue 23 part 6: ops endpoints apart from the public port, and OIDC/JWT bearer tokens.
    api_metrics_port: int = Field(
        default=9108, ge=0, le=65535,
        description="Port of the API's Prometheus /metrics, bound to the API's host; 0 = off. "
        "Never the API's own port, so a balancer forwarding /* to it cannot expose them.",
    )
    api_jwt_jwks_url: str | None = Field(
        default=None, description="JWKS URL of an OIDC issuer: enables JWT bearer tokens."
    )
    api_jwt_jwks_file: Path | None = Field(
        default=None, description="A JWKS file instead of a URL (re-read like a fetched set)."
    )
    api_jwt_issuer: str | None = Field(
        default=None, description="Required `iss` of JWT bearer tokens (required with a JWKS)."
    )
    api_jwt_audience: str | None = Field(
        default=None,
        description="The audience JWT bearer tokens must name (required with a JWKS): their "
        "`aud`, or for a Cognito access token (`token_use: access`, no `aud`) its `client_id` "
        "(the app client's id).",
    )
    api_jwt_mailboxes_claim: str = Field(
        default="mailboxes",
        description="Claim listing the mailbox ids a JWT may read (a list, or one string).",
    )
    api_jwt_algorithms: tuple[
        Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384",
                "ES512", "EdDSA"], ...
    ] = Field(
        default=("RS256", "ES256"), min_length=1,
        description="Accepted JWT signature algorithms: public-key ones only (never none/HS*).",
    )
    api_jwt_leeway_s: int = Field(
        default=30, ge=0, le=600, description="Clock skew allowed on exp/nbf/iat, in seconds."
    )
    api_jwt_max_lifetime_s: int = Field(
        default=86_400, ge=60, le=31 * 86_400,
        description="Longest a JWT may live, in seconds: `exp - iat`, and `exp` from now, at "
        "most this (plus the leeway); `exp` must be a JSON number. A token minted to last "
        "for ever (`exp: 1e20`) is refused. Cognito's tokens last 1 day at most.",
    )
    api_jwt_jwks_lifespan_s: int = Field(
        default=3600, ge=1, description="Seconds a fetched JWKS is used before it is fetched again."
    )
    api_jwt_jwks_cooldown_s: int = Field(
        default=60, ge=0,
        description="Least seconds between two JWKS fetches forced by an unknown `kid` (key "
        "rotation) — a flood of made-up kids cannot turn into a flood of fetches.",
    )
    # Issue 16: hostile input and what the API and the dead-letter store keep.
    cursor_key: SecretStr | None = Field(
        default=None,
        description="HMAC key of page cursors, shared by every API replica; unset = random "
        "per process (cursors then work only on the replica that issued them).",
    )
    expose_scores: bool = Field(
        default=False,
        description="Return raw engine scores (single-tenant only); default: rank-derived.",
    )
    dlq_ttl_days: int = Field(
        default=30, ge=1, description="Days a dead-letter entry is kept before it expires."
    )
    console: bool | None = Field(
        default=None,
        description="Serve the search console at /console; unset = only with env 'dev'.",
    )

    @model_validator(mode="after")
    def _sentinel_needs_a_master(self) -> Settings:
        if self.redis_sentinel and not self.redis_sentinel_master:
            raise ValueError("a sentinel:// SIDECAR_REDIS_URL needs SIDECAR_REDIS_SENTINEL_MASTER")
        return self

    @property
    def redis_sentinel(self) -> bool:
        """The broker is reached through Redis Sentinel (``sentinel://`` URL)."""
        return self.redis_url.lstrip().lower().startswith("sentinel://")

    @property
    def resolved_state_table(self) -> str:
        """The sidecar's own table: explicit, or derived from the mail table's name."""
        return self.state_table or f"{self.table}-sidecar"

    @property
    def console_enabled(self) -> bool:
        """``SIDECAR_CONSOLE`` decides when set; otherwise the console is a dev-only page."""
        return self.env == "dev" if self.console is None else self.console

    @property
    def fulltext_queue(self) -> str:
        return f"{self.queue_prefix}.fulltext"

    @property
    def vectors_queue(self) -> str:
        return f"{self.queue_prefix}.vectors"

    @property
    def opensearch_hosts(self) -> list[str]:
        """The nodes of ``opensearch_url`` (one URL, or a comma list of them)."""
        return [h.strip() for h in self.opensearch_url.split(",") if h.strip()]

    @property
    def qdrant_embedded(self) -> bool:
        return not self.qdrant_url

    @property
    def qdrant_layout(self) -> dict[str, int]:
        """``create_collection`` arguments for a Qdrant cluster (the embedded store ignores
        them); only those set, so the server's defaults apply to the rest."""
        layout = {
            "shard_number": self.qdrant_shard_number,
            "replication_factor": self.qdrant_replication_factor,
            "write_consistency_factor": self.qdrant_write_consistency_factor,
        }
        return {k: v for k, v in layout.items() if v is not None}


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process-wide settings (read from the environment once)."""
    return Settings()


def invalid_settings(exc: ValidationError) -> str | None:
    """One line naming each ``SIDECAR_*`` variable a :class:`Settings` refused and why — never
    its value (it may be a secret) — or None when ``exc`` is not about the settings. A
    mistyped variable is the operator's to fix: a one-line answer, not a traceback."""
    if exc.title != Settings.__name__:
        return None
    problems = []
    for error in exc.errors(include_url=False, include_input=False):
        where = error.get("loc", ())
        name = f"SIDECAR_{str(where[0]).upper()}" if where else "SIDECAR_* settings"
        problems.append(f"{name}: {error.get('msg', 'invalid')}")
    return "invalid setting " + "; ".join(problems)


def to_env(settings: Settings) -> dict[str, str]:
    """The ``SIDECAR_*`` variables that reproduce these settings in a child process."""
    env: dict[str, str] = {}
    for name, value in settings.model_dump(mode="json").items():
        secret = getattr(settings, name)
        if isinstance(secret, SecretStr):  # the dump masks it; a child process needs it
            value = secret.get_secret_value()
        if value is not None:
            text = json.dumps(value) if isinstance(value, list | dict) else str(value)
            env[f"SIDECAR_{name.upper()}"] = text
    return env
