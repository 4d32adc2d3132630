"""Record sources: the live stream tailer and export/scan backfills."""
