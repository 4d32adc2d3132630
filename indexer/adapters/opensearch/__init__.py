"""OpenSearch: the one client (managed domain, serverless collection or a local node), its
errors classified, and the messages index the workers write and the API reads."""
