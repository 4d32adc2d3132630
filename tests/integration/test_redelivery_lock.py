"""The lock kombu takes to move a dead worker's unacked tasks back expires soon.

A worker SIGKILLed (an OOM kill) while it holds that lock leaves it in Redis; with kombu's
default of 300 s no worker redelivers anything for five minutes. Kombu ignores a transport
option it does not know, so this reads the value back from a channel on the real Redis.
"""

from __future__ import annotations

import pytest
from celery import Celery

from indexer.pipeline.celery_app import UNACKED_MUTEX_EXPIRE_S, configure
from indexer.settings import Settings

pytestmark = pytest.mark.stack


def test_a_dead_restorers_lock_expires_within_30_s(settings: Settings) -> None:
    app = Celery("lock-check")
    configure(app, settings)
    with app.connection_for_write() as conn:
        channel = conn.default_channel
        assert channel.unacked_mutex_expire == UNACKED_MUTEX_EXPIRE_S <= 30
        assert channel.unacked_restore_interval <= 5
