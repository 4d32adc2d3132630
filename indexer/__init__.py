"""mail-search-sidecar: keeps search indexes in step with an AECS-1 DynamoDB mail store."""

from indexer import otel_guard as _otel_guard

__version__ = "0.1.0"

# Before any library is imported through this package: without an OTLP endpoint the
# OpenTelemetry SDK stays out of the process (redis-py would import it; indexer.otel says why).
_otel_guard.keep_sdk_out()
