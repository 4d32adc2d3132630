"""mail-search-sidecar: keeps search indexes in step with an AECS-1 DynamoDB mail store."""

__version__ = "0.1.0"
