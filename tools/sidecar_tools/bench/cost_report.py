"""``sidecar bench-cost``'s figures per message, against M1, and what they cost a month.

Prices: DynamoDB on-demand in us-east-1, as issue 28 quotes AWS's pricing page
(https://aws.amazon.com/dynamodb/pricing/on-demand/): $0.125 per million read request units,
$0.625 per million write request units. Streams reads, S3 and OpenSearch are counted, not
priced (OpenSearch is billed per instance hour, not per request).
"""

from __future__ import annotations

from typing import Any

READ_USD_PER_MILLION = 0.125  # read request units, on-demand, us-east-1 (AWS pricing page)
WRITE_USD_PER_MILLION = 0.625  # write request units, on-demand, us-east-1 (AWS pricing page)
PRICE_SOURCE = ("AWS's DynamoDB on-demand pricing page, us-east-1, as issue 28 quotes it: "
                "https://aws.amazon.com/dynamodb/pricing/on-demand/")
SECONDS_PER_MONTH = 30 * 86_400
DEFAULT_RATE = 100.0  # messages stored per second

LABELS = {
    "live": "live: one shard page",
    "live_sharded": "live: the same records over {shards} shard pages (emulated)",
    "redelivery": "re-delivery of the same records",
    "export": "backfill from an S3 export ({export_files} data files)",
    "scan": "backfill `--scan` ({segments} segments, pages of {page_size})",
}


def per_message(result: dict[str, Any], path: str) -> dict[str, Any]:
    """One path's figures per stored message, and against M1."""
    n = result["messages"]
    m1 = result["m1"]
    p = result["paths"][path]
    by_service: dict[str, dict[str, float]] = {}
    for key, count in p["requests"].items():
        service, op = key.split(":", 1)
        by_service.setdefault(service, {})[op] = count / n
    return {
        "syncs_fulltext": p["syncs"]["fulltext"] / n,
        "syncs_vectors": p["syncs"]["vectors"] / n,
        "dynamodb": by_service.get("dynamodb", {}),
        "streams": sum(by_service.get("dynamodbstreams", {}).values()),
        "s3": sum(by_service.get("s3", {}).values()),
        "opensearch": by_service.get("opensearch", {}),
        "read_units": p["read_units"] / n,
        "write_units": p["write_units"] / n,
        "reads_x_m1": p["read_units"] / m1["read_units"] if m1["read_units"] else 0.0,
        "writes_x_m1": p["write_units"] / m1["write_units"] if m1["write_units"] else 0.0,
    }


def monthly_usd(units_per_message: float, usd_per_million: float, rate: float) -> float:
    """What ``units_per_message`` cost a month at ``rate`` messages per second."""
    return units_per_message * rate * SECONDS_PER_MONTH * usd_per_million / 1e6


def _ops(ops: dict[str, float]) -> str:
    total = sum(ops.values())
    if not ops:
        return "0"
    parts = ", ".join(f"{op} {v:.2f}" for op, v in sorted(ops.items(), key=lambda kv: -kv[1]))
    return f"**{total:.2f}**: {parts}"


def markdown(result: dict[str, Any], rate: float = DEFAULT_RATE) -> str:
    """One Markdown table: a row per path and M1's, then what was emulated and priced."""
    n, m1, opts = result["messages"], result["m1"], result["options"]
    month = rate * SECONDS_PER_MONTH
    lines = [
        f"{n} messages of {result['corpus']} ({result['items']} items, "
        f"{m1['participant_items'] / n:.1f} participant items per message), batches of "
        f"{result['batch_messages']}; per stored message; {result['date']}",
        "",
        "| path | syncs / msg: full text, vectors | DynamoDB requests / msg | read units / msg "
        "| × M1 | write units / msg | × M1 | Streams requests / msg | S3 requests / msg "
        f"| OpenSearch requests / msg | $/month at {rate:g} msgs/s: reads + writes |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---|---:|",
    ]
    for path, label in LABELS.items():
        f = per_message(result, path)
        reads = monthly_usd(f["read_units"], READ_USD_PER_MILLION, rate)
        writes = monthly_usd(f["write_units"], WRITE_USD_PER_MILLION, rate)
        lines.append(
            f"| {label.format(**opts)} | {f['syncs_fulltext']:.2f}, {f['syncs_vectors']:.2f} | "
            f"{_ops(f['dynamodb'])} | {f['read_units']:.1f} | {f['reads_x_m1']:.2f} | "
            f"{f['write_units']:.2f} | {f['writes_x_m1']:.2f} | {f['streams']:.3f} | "
            f"{f['s3']:.3f} | {_ops(f['opensearch'])} | "
            f"{reads:,.0f} + {writes:,.0f} = {reads + writes:,.0f} |")
    m1_reads = monthly_usd(m1["read_units"] / n, READ_USD_PER_MILLION, rate)
    m1_writes = monthly_usd(m1["write_units"] / n, WRITE_USD_PER_MILLION, rate)
    lines += [
        f"| M1: Message + Body + META + participants read once, strong; PEOPLE written once "
        f"| 1, 1 | | {m1['read_units'] / n:.1f} | 1.00 | {m1['write_units'] / n:.2f} | 1.00 "
        f"| | | | {m1_reads:,.0f} + {m1_writes:,.0f} = {m1_reads + m1_writes:,.0f} |",
        "",
        f"- Prices: ${READ_USD_PER_MILLION} per million read request units, "
        f"${WRITE_USD_PER_MILLION} per million write request units ({PRICE_SOURCE}). "
        f"{rate:g} messages/s = {month / 1e6:,.1f} million messages a month (30 days). "
        "A backfill is paid once: a million messages backfilled cost its $/month "
        f"÷ {month / 1e6:,.1f}.",
        "- Units from item sizes (moto's ConsumedCapacity is a placeholder): 4 KB per strong "
        "read unit per item (over the page for Query/Scan, half when eventually consistent), "
        "1 KB per write unit on the item as stored.",
        f"- **The {opts['shards']}-shard row is an emulation**: moto's stream has one shard, "
        "so its records are partitioned by a hash of their partition key into "
        f"{opts['shards']} pages, read in one sweep and applied together as the tailer "
        "applies a sweep (all of them fit one sweep: a backlog); its Streams requests are "
        "the one real shard's read.",
        "- The worker's tasks run in the bench's process (the product's Ingestor cuts the "
        "batches); not counted: Qdrant requests, the tailer's idle polling and lease "
        "renewals (per second, not per message), setup (tables, index templates).",
    ]
    return "\n".join(lines)
