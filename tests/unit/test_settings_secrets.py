"""Secrets in the settings are ``SecretStr``: never in a repr, a log line or a JSON dump."""

from __future__ import annotations

from pydantic import SecretStr

from indexer.settings import Settings

SECRETS = {
    "opensearch_password": "os-password-never-shown",
    "qdrant_api_key": "qdrant-key-never-shown",
    "cursor_key": "cursor-key-never-shown",
}


def test_every_secret_setting_is_masked() -> None:
    settings = Settings(**SECRETS)  # type: ignore[arg-type]  # pydantic coerces str
    shown = repr(settings) + str(settings) + settings.model_dump_json()
    for name, value in SECRETS.items():
        assert isinstance(getattr(settings, name), SecretStr), name
        assert getattr(settings, name).get_secret_value() == value
        assert value not in shown, name


def test_secret_like_fields_are_all_secret_str() -> None:
    """A new field named like a secret must be a SecretStr too (this list is not the rule)."""
    for name, field in Settings.model_fields.items():
        if any(word in name for word in ("password", "api_key", "secret", "cursor_key")):
            assert "SecretStr" in str(field.annotation), name
