"""Keeps the OpenTelemetry SDK out of a process that does not trace (see :mod:`indexer.otel`
for why: redis-py imports it whenever it is installed).

Imported by the ``indexer`` package itself, before any library, so it imports nothing of the
sidecar's (the package's own import would otherwise be a circle) and nothing heavy.
"""

from __future__ import annotations

import importlib.abc
import os
import sys
from collections.abc import Sequence
from contextlib import suppress
from importlib.machinery import ModuleSpec
from types import ModuleType

ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
SDK = "opentelemetry.sdk"


def wanted() -> bool:
    """The operator asked for traces: an OTLP endpoint is set."""
    return any(os.environ.get(name, "").strip() for name in ENDPOINT_VARIABLES)


class _SdkRefused(importlib.abc.MetaPathFinder):
    """While tracing is off, the OpenTelemetry SDK is not importable: an import of it fails as
    a missing module does, which is what the libraries that import it optionally (redis-py)
    already handle."""

    def find_spec(self, fullname: str, path: Sequence[str] | None,
                  target: ModuleType | None = None) -> ModuleSpec | None:
        if fullname == SDK or fullname.startswith(f"{SDK}."):
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (tracing is off: OTEL_EXPORTER_OTLP_ENDPOINT "
                "is unset)", name=fullname)
        return None


_REFUSED = _SdkRefused()


def keep_sdk_out() -> None:
    """Where tracing is not wanted, keep the SDK out of this process (see :mod:`indexer.otel`);
    :func:`indexer.otel.setup` lets it in again. A process that imported the SDK before (an
    application embedding the indexer with its own telemetry, an auto-instrumentation wrapper
    such as Lambda's ADOT layer, which sets up the SDK before the handler is imported) is left
    as it is."""
    if wanted() or SDK in sys.modules or _REFUSED in sys.meta_path:
        return
    sys.meta_path.insert(0, _REFUSED)


def let_sdk_in() -> None:
    """Tracing is being set up (:func:`indexer.otel.setup`): the SDK may be imported."""
    with suppress(ValueError):
        sys.meta_path.remove(_REFUSED)
