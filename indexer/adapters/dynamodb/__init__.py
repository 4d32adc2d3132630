"""DynamoDB: the mail table's items read back consistently, and the sidecar's own table —
checkpoints and leases, participants, dead letters — with their definitions."""
