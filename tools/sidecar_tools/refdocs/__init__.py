"""Reference pages of the documentation site, generated from the code they describe.

``docs/reference/configuration.md`` comes from :class:`indexer.settings.Settings`,
``docs/reference/cli.md`` from the Typer app, ``docs/reference/api.md`` and
``docs/reference/openapi.json`` from the API's OpenAPI document. Generated rather than
written so that a setting, option or route cannot be added without its page changing; a test
compares the committed pages with fresh output (``python -m sidecar_tools.refdocs`` rewrites
them).
"""
