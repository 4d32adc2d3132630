"""Language detection at index time (issue 43, part 4): accuracy and speed, as the indexer runs it.

``python -m sidecar_tools.quality.languages`` reads the multilingual set (each Message-ID
names its language: ``de-01@multilingual.example``) and prints, as JSON, the share of
messages :func:`indexer.core.language.detect` labels right (per language and overall), the
time per message, and, for the English corpora beside it, how many messages would get a
language's fields (a guess of another language above the confidence floor).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from indexer.core.language import ANALYZERS, UNKNOWN, detect
from sidecar_tools.quality.corpus import read_corpus
from sidecar_tools.quality.suite import DEFAULT_CORPORA

MULTILINGUAL = DEFAULT_CORPORA / "multilingual.jsonl"
ENGLISH = (DEFAULT_CORPORA / "notmuch-lkml.jsonl.gz", DEFAULT_CORPORA / "linux-mips-4k.jsonl.gz")


def _text(email: dict[str, Any]) -> tuple[str, str]:
    content = email.get("content") or {}
    return (str(email["metadata"].get("subject") or ""),
            str(content.get("clean") or content.get("text") or ""))


def label(email: dict[str, Any]) -> str:
    """The language the set's Message-ID names (``de-01@...`` is German)."""
    return str(email["messageId"]).split("-", 1)[0]


def accuracy(path: Path) -> dict[str, Any]:
    emails = read_corpus(path)
    detect("warm", "the model is loaded once")
    right: Counter[str] = Counter()
    seen: Counter[str] = Counter()
    wrong: list[str] = []
    times: list[float] = []
    for email in emails:
        start = time.perf_counter()
        got = detect(*_text(email))
        times.append((time.perf_counter() - start) * 1e6)
        want = label(email)
        seen[want] += 1
        if got == want:
            right[want] += 1
        else:
            wrong.append(f"{email['messageId']}: {got}")
    return {
        "corpus": path.name, "messages": len(emails),
        "accuracy": round(sum(right.values()) / len(emails), 4),
        "per language": {k: f"{right[k]}/{n}" for k, n in sorted(seen.items())},
        "wrong": wrong,
        "us per message p50": round(statistics.median(times), 1),
    }


def english(path: Path) -> dict[str, Any]:
    emails = read_corpus(path)
    got = Counter(detect(*_text(e)) for e in emails)
    fields = sum(n for code, n in got.items() if code in ANALYZERS)
    return {"corpus": path.name, "messages": len(emails), "detected": dict(got.most_common()),
            "given a language's fields": fields, "unsure": got.get(UNKNOWN, 0)}


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, default=MULTILINGUAL)
    parser.add_argument("--english", type=Path, nargs="*", default=list(ENGLISH))
    args = parser.parse_args(argv)
    report = {"multilingual": accuracy(args.corpus),
              "english": [english(p) for p in args.english]}
    print(json.dumps(report, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
