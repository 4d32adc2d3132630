"""Thin adapters: the only modules that import boto3, opensearchpy, qdrant_client, redis, torch."""
