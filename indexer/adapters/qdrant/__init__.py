"""Qdrant: the vector index port over two engines (the embedded Edge shard and a server
cluster), the collections as write targets, and Edge's types and errors."""
