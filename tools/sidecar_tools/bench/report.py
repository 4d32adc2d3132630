"""Turn one run's raw figures into JSON, the target ratios, and a Markdown table.

Every target is a ratio of two figures of the same run; nothing here compares with another
run or a hard-coded time.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sidecar_tools.bench.cost_report import markdown as cost_markdown

# The raw calls whose p50s add up to what the API must at least spend, per mode.
ENGINE_CALLS = {
    "fulltext": ("opensearch_search", "batch_get_page"),
    "semantic": ("encode_query", "qdrant_search", "batch_get_page"),
    "hybrid": ("opensearch_search", "encode_query", "qdrant_search", "batch_get_page"),
    "similar": ("qdrant_similar", "opensearch_mlt", "batch_get_page"),
}
API_SLACK_MS = 10.0
P99_LIMIT_MS = 150.0
P99_AT = 100_000
NOTMUCH_HINT = "not installed: `apt-get install notmuch` (Debian/Ubuntu), then run the bench again"


def plain(value: Any) -> Any:
    """JSON-able copy of the run's figures (dataclasses, paths, nested containers)."""
    if hasattr(value, "as_json"):
        return plain(value.as_json())
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        return {k: plain(v) for k, v in fields.items()}
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [plain(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, float):
        return round(value, 3)
    return value


@dataclass(frozen=True)
class Target:
    name: str
    measured: float
    needed: str
    met: bool | None  # None: not applicable in this run (e.g. no notmuch, small N)


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("inf")


def _at_least(name: str, value: float, reference: float, factor: float) -> Target:
    """``value`` must be at least ``factor`` times ``reference`` (both from this run)."""
    return Target(name, _ratio(value, reference), f">= {factor:g}", value >= factor * reference)


def engine_gap_ms(api: dict[str, Any], raw: dict[str, Any], mode: str) -> float:
    """API p50 of ``mode`` less the p50s of the raw engine calls it makes (``ENGINE_CALLS``):
    the API's own overhead, which must stay within ``API_SLACK_MS``."""
    return float(api[mode]["p50_ms"] - sum(raw[c]["p50_ms"] for c in ENGINE_CALLS[mode]))


def targets(j: dict[str, Any]) -> list[Target]:
    p, lim, peers = j["pipeline"], j["limits"], j["peers"]
    pipe, ft = p["pipeline"]["messages_per_s"], p["fulltext_only"]["messages_per_s"]
    found = [
        _at_least("pipeline / encoder limit", pipe, lim["encoder"]["per_s"], 0.9),
        _at_least("full-text-only / bulk limit", ft, lim["bulk"]["per_s"], 0.8),
        _at_least("pipeline / naive peer", pipe, peers["naive"]["per_s"], 10),
        Target(
            "re-delivery embeddings",
            float(p["redelivery"]["embedded"]),
            "== 0",
            p["redelivery"]["embedded"] == 0,
        ),
    ]
    notmuch = peers.get("notmuch")
    found.append(
        Target(
            "full-text-only / notmuch",
            _ratio(ft, notmuch["per_s"]) if notmuch else float("nan"),
            ">= 2",
            ft >= 2 * notmuch["per_s"] if notmuch else None,
        )
    )
    raw, api = j["search"]["raw"], j["search"]["api"]
    for mode in ENGINE_CALLS:
        gap = engine_gap_ms(api, raw, mode)
        found.append(
            Target(
                f"API {mode} p50 - engine p50s (ms)", gap, f"<= {API_SLACK_MS:.0f}",
                gap <= API_SLACK_MS,
            )
        )
        big = j["corpus"]["messages"] >= P99_AT
        found.append(
            Target(
                f"API {mode} p99 (ms)",
                api[mode]["p99_ms"],
                f"< {P99_LIMIT_MS:.0f} at {P99_AT:,} msgs",
                api[mode]["p99_ms"] < P99_LIMIT_MS if big else None,
            )
        )
    return found


def _num(x: float) -> str:
    """Ratios keep three significant digits; milliseconds above 100 lose their decimals."""
    return f"{x:.0f}" if abs(x) >= 100 else f"{x:.3g}"


def _fmt(x: Any) -> str:
    return f"{x:,.1f}" if isinstance(x, float) else str(x)


def runtime_table(j: dict[str, Any]) -> list[str]:
    """The encoder runtimes side by side (``--compare-runtime``; none without it): each one's
    encoder limit, its pipeline and the ratio, all from this run."""
    if not j.get("runtimes"):
        return []
    out = [
        "",
        "Encoder runtimes (same texts, same stream, same run):",
        "",
        "| runtime | dtype | encoder limit (texts/s) | pipeline (msgs/s) | pipeline / encoder "
        "| pipeline s | embedding s |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    out += [
        f"| {r['runtime']} | {r['dtype']} | {r['encoder_texts_per_s']:,.1f} "
        f"| {r['pipeline_messages_per_s']:,.1f} | {_num(r['pipeline_per_encoder'])} "
        f"| {r['pipeline_seconds']:.1f} | {r['embed_s']:.1f} |"
        for r in j["runtimes"]
    ]
    return out


def markdown(j: dict[str, Any]) -> str:
    """The run as Markdown tables: stages, search, encoder runtimes, memory, targets, and
    the bill per message per indexing path."""
    p, lim, peers, s = j["pipeline"], j["limits"], j["peers"], j["search"]
    rows = [
        ("encoder limit (texts/s)", lim["encoder"]["per_s"], f"{lim['encoder']['items']} texts"),
        ("bulk limit (docs/s)", lim["bulk"]["per_s"], f"{lim['bulk']['items']} docs"),
        (
            "pipeline, both indexes (msgs/s)",
            p["pipeline"]["messages_per_s"],
            f"{p['pipeline']['seconds']:.1f}s, {p['pipeline']['embedded']} embedded",
        ),
        ("  last message full-text searchable (s)", p["pipeline"]["searchable_s"] or "n/a", ""),
        (
            "  vectors stage busy (s)",
            p["pipeline"].get("stage_s", {}).get("vectors", "n/a"),
            f"embedding {p['pipeline'].get('embed_s', 'n/a')}s, own (reads, cache, store "
            f"writes) {p['pipeline'].get('vectors_own_s', 'n/a')}s",
        ),
        ("  full-text stage busy (s)", p["pipeline"].get("stage_s", {}).get("fulltext", "n/a"),
         ""),
        (
            "full-text-only path (msgs/s)",
            p["fulltext_only"]["messages_per_s"],
            f"searchable after {p['fulltext_only']['searchable_s']}s",
        ),
        (
            "re-delivery (msgs/s)",
            p["redelivery"]["messages_per_s"],
            f"{p['redelivery']['embedded']} embedded",
        ),
        (
            "naive peer (msgs/s)",
            peers["naive"]["per_s"],
            f"{peers['naive']['items']} msgs, {peers['naive_records']} records",
        ),
        (
            "notmuch new (msgs/s)",
            peers["notmuch"]["per_s"] if peers["notmuch"] else "absent",
            f"{peers['notmuch']['items']} msgs" if peers["notmuch"] else NOTMUCH_HINT,
        ),
    ]
    out = ["| stage | rate | notes |", "|---|---:|---|"]
    out += [f"| {a} | {_fmt(b)} | {c} |" for a, b, c in rows]
    out += [
        "",
        f"Search ({s['api']['fulltext']['clients']} concurrent clients; ms):",
        "",
        "| call | p50 | p95 | p99 | req/s | errors |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for name, lat in [
        *((f"API {m}", v) for m, v in s["api"].items()),
        *((f"raw {m}", v) for m, v in s["raw"].items()),
    ]:
        out.append(
            f"| {name} | {lat['p50_ms']:.1f} | {lat['p95_ms']:.1f} | {lat['p99_ms']:.1f} "
            f"| {lat['rps']:.1f} | {lat['errors']} |"
        )
    out += runtime_table(j)
    rss = p["worker_rss_mib"]
    out += [
        "",
        f"Peak RSS (MiB): full-text worker {rss.get('fulltext', 0):.0f} (its contacts worker "
        f"{rss.get('contacts', 0):.0f}), vectors worker {rss.get('vectors', 0):.0f}, "
        f"API {s['api_rss_mib']:.0f}",
        "",
        "| target | measured | needed | met |",
        "|---|---:|---|---|",
    ]
    for t in targets(j):
        met = "n/a" if t.met is None else ("yes" if t.met else "**no**")
        out.append(f"| {t.name} | {_num(t.measured)} | {t.needed} | {met} |")
    if j.get("cost"):
        out += ["", "The bill per stored message, per indexing path (docs/results/cost.md):", "",
                cost_markdown(j["cost"])]
    return "\n".join(out)
