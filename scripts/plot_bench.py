"""Draw a run's plot (throughput by stage) from the JSON of ``sidecar bench --json``.

matplotlib is not in the pinned environment (the product never draws); install it aside:

    .venv/bin/python -m pip install --target .sidecar/plot matplotlib
    PYTHONPATH=.sidecar/plot .venv/bin/python scripts/plot_bench.py \
        docs/results/runs/2026-11-30-5000.json docs/results/runs/2026-11-30-5000.png
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def stages(result: dict[str, Any]) -> list[tuple[str, float, str]]:
    """(label, per second, group) of every throughput figure of one run."""
    p, lim, peers = result["pipeline"], result["limits"], result["peers"]
    return [
        ("encoder limit (texts/s)", lim["encoder"]["per_s"], "limit"),
        ("pipeline, both indexes", p["pipeline"]["messages_per_s"], "ours"),
        ("re-delivery", p["redelivery"]["messages_per_s"], "ours"),
        ("full-text-only path", p["fulltext_only"]["messages_per_s"], "ours"),
        ("naive peer", peers["naive"]["per_s"], "peer"),
        ("notmuch new", peers["notmuch"]["per_s"], "peer"),
        ("bulk limit (docs/s)", lim["bulk"]["per_s"], "limit"),
    ]


def main(source: str, target: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    result = json.loads(Path(source).read_text(encoding="utf-8"))
    rows = stages(result)
    colours = {"limit": "#8c8c8c", "ours": "#1f77b4", "peer": "#ff7f0e"}
    fig, ax = plt.subplots(figsize=(8, 4))
    ax.barh([r[0] for r in rows], [r[1] for r in rows], color=[colours[r[2]] for r in rows])
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("per second (log scale; messages unless stated)")
    machine = result["machine"]
    ax.set_title(
        f"sidecar bench, {result['pipeline']['pipeline']['messages']} messages, "
        f"{machine['cores']} cores, {result['date'][:10]}"
    )
    for n, (_, value, _) in enumerate(rows):
        ax.text(value, n, f" {value:,.1f}", va="center", fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
