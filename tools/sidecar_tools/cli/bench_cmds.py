"""CLI: ``sidecar bench`` — the pipeline against its limits and its peers, in one run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console

from indexer.settings import get_settings

console = Console(stderr=True)


def bench(
    corpus: Annotated[
        Path | None,
        typer.Option(
            help="NormalizedEmail JSON lines; default ../shared linux-mips, else generated."
        ),
    ] = None,
    messages: Annotated[
        int,
        typer.Option(
            min=10, help="Messages to index (replayed over further mailboxes beyond the corpus)."
        ),
    ] = 5000,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the figures here.")] = None,
    search_seconds: Annotated[float, typer.Option(help="Seconds per API search mode.")] = 20.0,
    raw_seconds: Annotated[float, typer.Option(help="Seconds per raw engine call.")] = 5.0,
    naive_messages: Annotated[int, typer.Option(help="Messages of the naive peer.")] = 500,
    encoder_texts: Annotated[
        int, typer.Option(min=10, help="forai texts the encoder limit is measured on (a rate).")
    ] = 1000,
    workdir: Annotated[Path, typer.Option(help="Cache and scratch space.")] = Path(
        ".sidecar/bench"
    ),
    compare_runtime: Annotated[str | None, typer.Option(
        help="Also measure the encoder limit and the pipeline with this encoder runtime (onnx "
             "or torch, not SIDECAR_EMBED_RUNTIME's), in the same run, side by side.")] = None,
    cost_messages: Annotated[int, typer.Option(
        min=0, help="Messages the bill per indexing path is measured on (as bench-cost); "
                    "0 skips it.")] = 200,
) -> None:
    """Measure encoder and bulk limits, the pipeline, re-delivery, peers, search, memory and
    the bill per message of each indexing path; print one table (Markdown) and the target
    ratios. Loads its table once per corpus and N."""
    from sidecar_tools.bench import runtimes
    from sidecar_tools.bench.report import markdown, plain
    from sidecar_tools.bench.run import Options, run

    settings = get_settings()
    try:
        other = None if compare_runtime is None else runtimes.check(compare_runtime, settings)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--compare-runtime") from exc
    opts = Options(
        corpus=corpus,
        messages=messages,
        naive_messages=min(naive_messages, messages),
        encoder_texts=encoder_texts,
        search_seconds=search_seconds,
        raw_seconds=raw_seconds,
        workdir=workdir,
        compare_runtime=other,
        cost_messages=cost_messages,
    )
    result = plain(run(opts, settings, lambda line: console.print(f"[dim]bench:[/] {line}")))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(markdown(result))


def bench_encoders(
    corpus: Annotated[Path | None, typer.Option(help="Default: as for bench.")] = None,
    messages: Annotated[int, typer.Option(min=20, help="Messages whose forai is encoded.")] = 1000,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the rows here.")] = None,
    workdir: Annotated[Path, typer.Option(help="Cache (ONNX graphs).")] = Path(".sidecar/bench"),
    short: Annotated[int, typer.Option(min=0, help="Also both precisions truncated to this "
                                                   "many tokens (0: not).")] = 128,
) -> None:
    """The float32 ONNX encoder vs its int8 graph (and both at 128 tokens) on the corpus's
    forai texts, interleaved, with the retrieval gates of docs/encoder.md (recall@10, top-10
    overlap, per-text cosine floor, speed by the CPU's kernel path)."""
    from sidecar_tools.bench import encoders
    from sidecar_tools.bench.corpus import default_corpus, select
    from sidecar_tools.bench.dataset import messages_of

    settings = get_settings()
    chosen = select(corpus or default_corpus(), messages, workdir / "corpus")
    texts, threads = [], []
    for m in messages_of(chosen):
        if (m.forai or "").strip() and m.forai not in texts:
            texts.append(str(m.forai))
            threads.append(m.thread_key)
    found = encoders.variants(
        settings.embed_max_tokens,
        settings.embed_threads,
        settings.embed_batch_size,
        settings.embed_onnx_dir,
        short,
    )
    console.print(f"encoding {len(texts)} texts with {len(found)} variants, interleaved")
    encoders.measure(found, texts, settings.batch_messages)
    rows = encoders.compare(found, threads)
    if json_out is not None:
        json_out.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    print(encoders.markdown(rows))


def bench_scale(
    copies: Annotated[int, typer.Option(min=1, help="Mailboxes the indexed messages are copied "
                                                    "into (engines hold N x (copies+1)).")] = 19,
    corpus: Annotated[Path | None, typer.Option(help="Default: as for bench.")] = None,
    messages: Annotated[int, typer.Option(min=10, help="Messages through the pipeline.")] = 5000,
    search_seconds: Annotated[float, typer.Option(help="Seconds per API search mode.")] = 20.0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the figures here.")] = None,
    workdir: Annotated[Path, typer.Option(help="Cache and scratch space.")] = Path(
        ".sidecar/bench"
    ),
    server: Annotated[bool, typer.Option(help="Also measure a Qdrant server (same data).")] = True,
    clients: Annotated[int, typer.Option(min=1, help="Concurrent clients.")] = 8,
    unqueued: Annotated[bool, typer.Option(help="Also measure with one client (no queueing).")
                        ] = True,
) -> None:
    """API latency with N x (copies+1) messages in the engines: N through the pipeline into the
    searched mailbox, then their documents and points copied into other mailboxes."""
    from sidecar_tools.bench.report import plain
    from sidecar_tools.bench.scale import ScaleOptions, run

    opts = ScaleOptions(corpus, messages, copies, search_seconds, clients, workdir=workdir,
                        server=server, unqueued=unqueued)
    result = plain(run(opts, get_settings(), lambda line: console.print(f"[dim]bench:[/] {line}")))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{result['indexed_documents']} documents, {result['points_copied']} points copied "
          f"in {result['copy_s']:.0f}s; vector writes: embedded "
          f"{result['points_per_s']:,.0f} points/s, server "
          f"{result.get('server_points_per_s', float('nan')):,.0f} points/s")
    print("| vector backend | clients | call | p50 | p95 | p99 | req/s | errors |")
    print("|---|---:|---|---:|---:|---:|---:|---:|")
    for key, backend in SCALE_BACKENDS:
        for suffix, count in (("", str(result["clients"])), ("_1", "1")):
            for prefix, label in ((key, "API "), (key.replace("api", "raw"), "raw ")):
                for mode, lat in result.get(prefix + suffix, {}).items():
                    print(f"| {backend} | {count} | {label}{mode} | {lat['p50_ms']:.1f} | "
                          f"{lat['p95_ms']:.1f} | {lat['p99_ms']:.1f} | {lat['rps']:.1f} | "
                          f"{lat['errors']} |")
    _print_scale_targets(result)


SCALE_BACKENDS = (("api", "embedded Edge"), ("api_server", "Qdrant server"))


def _print_scale_targets(result: dict[str, Any]) -> None:
    """The issue's two targets per backend and mode: p99 under the limit at 100,000 messages,
    and the API's p50 within its slack of the engine calls it makes (same run, same backend)."""
    from sidecar_tools.bench.report import API_SLACK_MS, ENGINE_CALLS, P99_LIMIT_MS, engine_gap_ms

    print("| vector backend | clients | mode | p99 (ms) | p99 < 150 | API p50 - engine p50s (ms) "
          "| <= 10 |")
    print("|---|---:|---|---:|---|---:|---|")
    for key, backend in SCALE_BACKENDS:
        for suffix, count in (("", str(result["clients"])), ("_1", "1")):
            api = result.get(key + suffix, {})
            raw = result.get(key.replace("api", "raw") + suffix, {})
            for mode, calls in ENGINE_CALLS.items():
                if mode not in api or not all(c in raw for c in calls):
                    continue
                p99, gap = api[mode]["p99_ms"], engine_gap_ms(api, raw, mode)
                print(f"| {backend} | {count} | {mode} | {p99:.1f} | "
                      f"{'yes' if p99 < P99_LIMIT_MS else 'no'} | {gap:.1f} | "
                      f"{'yes' if gap <= API_SLACK_MS else 'no'} |")


def bench_query_stream(
    layout: Annotated[str, typer.Option(
        help="edge: `sidecar serve` owns the embedded store and consumes the vectors queue; "
             "server: a Qdrant server (SIDECAR_QDRANT_URL, else one started from "
             "SIDECAR_QDRANT_BIN), a vectors worker of its own, the API only serving.")
    ] = "edge",
    seconds: Annotated[float, typer.Option(min=1, help="Seconds of each phase.")] = 60.0,
    rate: Annotated[float, typer.Option(
        min=0.1, help="Messages stored per second during the stream phase.")] = 5.0,
    clients: Annotated[int, typer.Option(min=1, help="Search client threads.")] = 8,
    seed_messages: Annotated[int, typer.Option(
        min=1, help="Messages indexed into the searched mailbox before measuring.")] = 500,
    corpus: Annotated[Path | None, typer.Option(
        help="NormalizedEmail JSON lines (default: the repository's linux-mips-4k).")] = None,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the figures here.")] = None,
    workdir: Annotated[Path, typer.Option(help="Scratch space (logs, the probe's events).")] = (
        Path(".sidecar/bench/query-stream")),
    keep: Annotated[bool, typer.Option(
        help="Keep the run's table, index and vectors afterwards.")] = False,
) -> None:
    """Semantic search through the API with and without a document stream being indexed:
    `clients` threads search for `seconds` (quiet), then as long again while the store
    writer stores mail at `rate` and the real tailer and workers index it (stream); the
    clients' p50/p95/p99 and errors, the API's own histograms per phase (bucket-bounded) and
    the documents indexed during the stream phase."""
    from sidecar_tools.bench.query_stream import LAYOUTS, QueryStreamOptions, run
    from sidecar_tools.bench.query_stream_report import markdown

    if layout not in LAYOUTS:
        raise typer.BadParameter("--layout must be edge or server")
    opts = QueryStreamOptions(layout=layout, seconds=seconds, rate=rate, clients=clients,
                              seed_messages=seed_messages, corpus=corpus, workdir=workdir,
                              keep=keep)
    result = run(opts, get_settings(), lambda line: console.print(f"[dim]query-stream:[/] {line}"))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(markdown(result))


def bench_vectors(
    points: Annotated[int, typer.Option(min=100, help="Random 384-d points per backend.")] = 10_000,
    backends: Annotated[str, typer.Option(help="Comma-separated: edge, server, local.")] = (
        "edge,server,local"
    ),
    clients: Annotated[int, typer.Option(min=1, help="Client threads.")] = 8,
    seconds: Annotated[float, typer.Option(help="Seconds per query kind.")] = 15.0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the figures here.")] = None,
) -> None:
    """The vector store backends side by side: insert rate and filtered top-20 latency on the
    same points and queries (``local`` = qdrant-client local mode, the old embedded store)."""
    from sidecar_tools.bench.vectors import run

    names = [b.strip() for b in backends.split(",") if b.strip()]
    result = run(names, points, clients, seconds, get_settings(),
                 lambda line: console.print(f"[dim]bench:[/] {line}"))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"{points} points, {clients} clients, {seconds:.0f}s per query kind")
    print("| backend | insert points/s | filtered p50 / p95 / p99 ms | similar (must_not) "
          "p50 / p95 / p99 ms | top-20 agreement |")
    print("|---|---:|---:|---:|---:|")
    for name in names:
        r = result[name]
        f, s = r["filtered_top20"], r["similar_must_not"]
        agree = next(v for k, v in r.items() if k.startswith("top20_agreement"))
        print(f"| {name} | {r['insert_points_s']:,.0f} | {f['p50_ms']:.1f} / {f['p95_ms']:.1f} / "
              f"{f['p99_ms']:.1f} | {s['p50_ms']:.1f} / {s['p95_ms']:.1f} / {s['p99_ms']:.1f} | "
              f"{agree:.3f} |")


def bench_freshness(
    rate: Annotated[list[float], typer.Option(
        help="Messages stored per second (repeat for several runs, e.g. --rate 5 --rate 20).")
    ] = [5.0],  # noqa: B006 (typer reads the default; it is never mutated)
    seconds: Annotated[float, typer.Option(min=1, help="Seconds of writing per rate.")] = 120.0,
    corpus: Annotated[Path | None, typer.Option(
        help="NormalizedEmail JSON lines (default: the shipped demo mailbox, replayed into "
             "further mailboxes with each text made new).")] = None,
    stage: Annotated[str, typer.Option(help="`sidecar tail --stage`: all | each.")] = "all",
    poll_s: Annotated[float, typer.Option(help="How often the engines are searched for the "
                                               "messages not yet found.")] = 0.1,
    drain_s: Annotated[float, typer.Option(help="After the last write, how long to wait for "
                                                "the indexes.")] = 600.0,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the figures here.")] = None,
    workdir: Annotated[Path, typer.Option(help="Scratch space (the probe's events).")] = Path(
        ".sidecar/bench/freshness"
    ),
    fulltext_concurrency: Annotated[int | None, typer.Option(
        min=1, help="Processes of the full-text worker (`sidecar worker --concurrency`; "
                    "default: its default).")] = None,
    ablate: Annotated[str, typer.Option(
        help="`contacts`: the full-text task keeps no contact summary (a measurement of what "
             "the summary costs; never a configuration).")] = "",
    store_alone: Annotated[bool, typer.Option(
        help="Run no sidecar process: the same writes, and a bare reader of the stream and "
             "the table (the store's floor under the stream and task parts).")] = False,
) -> None:
    """Freshness through the real `sidecar tail` path: a steady write rate into a table of the
    run's own, the tailer and one worker per queue as processes; per message, store write to
    full-text searchable and to vector searchable (p50/p95/p99) with a breakdown; exit 1 when a
    run at 5 msgs/s misses full text p99 ≤ 1.5 s or vectors p99 < 5 s."""
    from sidecar_tools.bench.freshness import FreshnessOptions, run
    from sidecar_tools.bench.freshness_report import TARGET_RATE, markdown, met_targets

    if stage not in ("all", "each"):
        raise typer.BadParameter("--stage must be all or each")
    if ablate not in ("", "contacts"):
        raise typer.BadParameter("--ablate must be contacts (or left out)")
    if store_alone:
        from sidecar_tools.bench.freshness_floor import floor_markdown, run_floor

        floors = [run_floor(FreshnessOptions(rate=r, seconds=seconds, corpus=corpus,
                                             workdir=workdir), get_settings(),
                            lambda line: console.print(f"[dim]freshness:[/] {line}"))
                  for r in rate]
        if json_out is not None:
            json_out.parent.mkdir(parents=True, exist_ok=True)
            json_out.write_text(json.dumps(floors, indent=2) + "\n", encoding="utf-8")
        print("\n\n".join(floor_markdown(f) for f in floors))
        return
    results = []
    for r in rate:
        opts = FreshnessOptions(rate=r, seconds=seconds, corpus=corpus, stage=stage,
                                poll_s=poll_s, drain_s=drain_s, workdir=workdir,
                                fulltext_concurrency=fulltext_concurrency, ablate=ablate)
        results.append(run(opts, get_settings(),
                           lambda line: console.print(f"[dim]freshness:[/] {line}")))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")
    print(markdown(results))
    missed = [res for res in results
              if res["rate"] == TARGET_RATE and not all(met_targets(res).values())]
    if missed:
        raise typer.Exit(1)


def bench_cost(
    corpus: Annotated[Path | None, typer.Option(
        help="NormalizedEmail JSON lines, plain or gzip (e.g. ../shared/corpora/"
             "linux-mips.jsonl.gz); default: the shipped demo mailbox.")] = None,
    messages: Annotated[int, typer.Option(min=1, help="The first N valid messages of the "
                                                      "corpus (all, when it has fewer).")] = 200,
    rate: Annotated[float, typer.Option(help="Messages stored per second the monthly cost "
                                             "is computed at.")] = 100.0,
    shards: Annotated[int, typer.Option(min=2, help="Shard pages of the emulated multi-shard "
                                                    "live path.")] = 8,
    export_files: Annotated[int, typer.Option(min=1, help="Data files of the S3 export.")] = 4,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the figures here.")] = None,
    workdir: Annotated[Path, typer.Option(help="Scratch space (removed after the run).")] = Path(
        ".sidecar/bench/cost"
    ),
) -> None:
    """DynamoDB requests, read and write units, Streams, S3 and OpenSearch requests and syncs
    per stored message on each path (live on one shard page, live over emulated shard pages,
    re-delivery, export backfill, scan backfill) against the minimum M1, with the monthly cost
    at --rate; the corpus stored into a fresh table of the run's own (docs/results/cost.md)."""
    from sidecar_tools.bench.cost import CostOptions, run
    from sidecar_tools.bench.cost_report import markdown

    opts = CostOptions(corpus=corpus, messages=messages, shards=shards,
                       export_files=export_files, workdir=workdir)
    result = run(opts, get_settings(), lambda line: console.print(f"[dim]bench-cost:[/] {line}"))
    result["rate"] = rate
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(markdown(result, rate))


def bench_tenants(
    messages: Annotated[int, typer.Option(min=30, help="Messages in the engines.")] = 20_000,
    mailboxes: Annotated[int, typer.Option(min=3, help="Mailboxes they are spread over.")
                         ] = 1_000,
    whale_share: Annotated[float, typer.Option(min=0.0, max=0.9,
                                               help="Share of the messages in the whale.")] = 0.1,
    mid_mailboxes: Annotated[int, typer.Option(min=1, help="Mid-size mailboxes (at most a "
                                                           "third of the others).")] = 300,
    mid_share: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of the non-whale "
                                             "messages in the mid-size mailboxes.")] = 0.5,
    distinct: Annotated[int, typer.Option(min=10, help="Distinct corpus emails (embedded "
                                          "once; copies reuse them, perturbed).")] = 2_000,
    corpus: Annotated[Path | None, typer.Option(help="NormalizedEmail JSON lines; default "
                                                "../shared/corpora/linux-mips.jsonl.gz when "
                                                "present, else generated mail.")] = None,
    backend: Annotated[str, typer.Option(help="edge (embedded) or server (the shared Qdrant "
                                         "binary).")] = "edge",
    shards: Annotated[int, typer.Option(min=1, help="OpenSearch primaries of the index.")] = 4,
    clients: Annotated[int, typer.Option(min=1, help="Clients of the throughput phase.")] = 8,
    search_seconds: Annotated[float, typer.Option(help="Seconds per mode, class and client "
                                                  "count.")] = 10.0,
    queries: Annotated[int, typer.Option(min=1, help="Queries per mode and class.")] = 20,
    recall_queries: Annotated[int, typer.Option(min=1, help="Queries per class of the recall "
                                                "measurement (exact search beside).")] = 200,
    float32: Annotated[bool, typer.Option(help="Also build the float32 layout beside the "
                                          "int8 one (RSS, disk, recall side by side).")] = True,
    purge: Annotated[bool, typer.Option(help="Then purge the whale while the others are "
                                        "searched (--backend server only).")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="Write the figures here.")] = None,
    workdir: Annotated[Path, typer.Option(help="Cache and scratch space.")] = Path(
        ".sidecar/bench"
    ),
) -> None:
    """A provider's store: a whale, mid-size mailboxes and a long tail in one index and one
    collection; latency per mode and mailbox class through the API, shards per search,
    recall of the vector search, bytes per message and per point (docs/operations/capacity.md)."""
    from sidecar_tools.bench.report import plain
    from sidecar_tools.bench.tenants import TenantOptions, run, summary

    if backend not in ("edge", "server"):
        raise typer.BadParameter("--backend is edge or server")
    opts = TenantOptions(corpus, messages, mailboxes, whale_share, mid_mailboxes, mid_share,
                         distinct, backend, shards, clients, search_seconds, queries, float32,
                         workdir, purge, recall_queries)
    result = plain(run(opts, get_settings(), lambda line: console.print(f"[dim]bench:[/] {line}")))
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        json_out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for line in summary(result):
        print(line)


def plan(
    mailboxes: Annotated[int, typer.Option(min=1, help="Mailboxes.")] = 10_000,
    messages_per_mailbox: Annotated[int, typer.Option(min=1, help="Mean messages per mailbox.")
                                    ] = 100,
    rate: Annotated[float, typer.Option(min=0.0, help="Messages written per second "
                                        "(sustained).")] = 5.0,
    searches: Annotated[float, typer.Option(min=0.0, help="API searches per second (peak).")
                        ] = 10.0,
    whale: Annotated[int, typer.Option(min=0, help="Messages of the largest mailbox (0: the "
                                       "mean).")] = 0,
    new_text_share: Annotated[float, typer.Option(min=0.0, max=1.0, help="Share of written "
                                                  "messages whose text is embedded.")] = 1.0,
    json_out: Annotated[bool, typer.Option("--json", help="Print the plan as JSON.")] = False,
) -> None:
    """Size OpenSearch, Qdrant and the tasks for a workload, with a monthly price at named
    list prices, from the vendors' rules and our measured figures
    (docs/operations/capacity.md; the calculation is indexer/core/capacity.py)."""
    from indexer.core.capacity import Workload
    from indexer.core.capacity import plan as make_plan

    work = Workload(mailboxes, messages_per_mailbox, rate, searches, new_text_share, whale)
    found = make_plan(work)
    if json_out:
        print(json.dumps(found.as_json(), indent=2))
        return
    for line in plan_lines(found):
        print(line)


def plan_lines(found: Any) -> list[str]:
    """The plan as the table docs/operations/capacity.md shows."""
    o, q, t = found.opensearch, found.qdrant, found.tasks
    w = found.workload
    lines = [
        f"workload: {w.mailboxes:,} mailboxes x {w.messages_per_mailbox:,} = {w.messages:,} "
        f"messages, {w.rate:g} msg/s written, {w.searches:g} searches/s",
        f"OpenSearch: {o.data_nodes} x {o.node} (heap {o.heap_gib:g} GiB each), "
        f"{o.primaries} primaries / {o.shards} shards, index {o.index_gib:,.1f} GiB, "
        f"storage {o.storage_gib:,.1f} GiB -> ${o.usd_month:,.0f}/month",
        f"Qdrant: {q.nodes} x {q.node}, RAM {q.ram_gib:,.1f} GiB (measured "
        f"{q.ram_gib_measured:,.2f}, vendor rule {q.ram_gib_vendor:,.2f} GiB per copy), "
        f"disk {q.disk_gib:,.1f} GiB -> ${q.usd_month:,.0f}/month",
        f"tasks: vectors {t.vectors_vcpu} vCPU, full-text {t.fulltext_vcpu} vCPU, API "
        f"{t.api_vcpu} vCPU (Fargate) -> ${t.usd_month:,.0f}/month",
        f"total: ${found.usd_month:,.0f}/month (list prices, us-east-1, on demand)",
    ]
    return lines + [f"note: {n}" for n in found.notes]


def register(app: typer.Typer) -> None:
    app.command("bench-vectors")(bench_vectors)
    app.command()(bench)
    app.command("bench-encoders")(bench_encoders)
    app.command("bench-scale")(bench_scale)
    app.command("bench-freshness")(bench_freshness)
    app.command("bench-query-stream")(bench_query_stream)
    app.command("bench-cost")(bench_cost)
    app.command("bench-tenants")(bench_tenants)
    app.command("plan")(plan)
