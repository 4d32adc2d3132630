"""Pure core: stream records, items, planning. Imports no client library (enforced by a test)."""
