"""Tooling commands, registered on ``sidecar`` through the ``mail_search_sidecar.commands``
entry point when this distribution is installed."""
