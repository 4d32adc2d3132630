"""Search API (FastAPI): full-text, semantic and hybrid search joined to hot rows."""
