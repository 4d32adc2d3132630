"""``sidecar tail``: follow the mail table's DynamoDB stream into the pipeline, for ever.

Why it is shaped this way:
- A shard's checkpoint advances only after the page's tasks are applied in both indexes
  (design invariant 3); a crash re-reads at most one page per shard, which is harmless because
  records are only triggers. One page at a time per shard keeps that simple.
- The pages of one sweep over the shards are applied as one set, grouped by message: a
  message's items sit under several partition keys and reach several shards, and applied
  shard by shard it was synced once per shard (issue 28).
- DynamoDB orders records per item only *within a shard lineage*: a child shard is read only
  once its parent is done, and shards are re-listed every second or so, so a split is followed
  promptly.
- Throttling and network errors are retried with jittered backoff and never end the reader;
  an expired iterator is re-acquired from the checkpoint.
- Records that expired (24 h retention) before being read cannot be recovered from the stream:
  that is reported loudly as a *gap* (log, ``gaps``, a counter, the exit status) pointing to
  ``sidecar backfill``, never skipped silently.
- Only the holder of the table's lease reads, so a standby can run beside it.
"""
