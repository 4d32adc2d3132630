"""Search-quality evaluation (``sidecar eval``): load a corpus, index it, measure queries.

``corpus`` samples and loads mail, ``local_index`` runs the real planner and sync in this
process (no queue in between), ``metrics`` is pure arithmetic, ``queries`` judges query files
and ``similar`` measures "similar emails" by same-thread recall.
"""
