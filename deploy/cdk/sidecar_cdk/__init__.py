"""The mail-search-sidecar CDK app\x27s constructs (see deploy/cdk/app.py)."""
