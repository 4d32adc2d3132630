"""``sidecar bench``: the pipeline, its limits and its peers measured in one run.

Every target is a ratio of two figures from the same run (the machine is small, shared and
noisy), so each stage records plain measurements and :mod:`sidecar_tools.bench.report` derives the
ratios. Modules: ``corpus`` (which mail), ``dataset`` (the table and its stream, loaded once
and reused), ``limits`` (encoder and bulk), ``pipeline`` (ingest end to end), ``peers`` (naive
per-record indexer, notmuch), ``search`` (API vs raw engines), ``encoders`` (encoder variants).
"""
