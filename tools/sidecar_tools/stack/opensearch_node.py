"""Build and launch a local single-node OpenSearch without Docker or a distribution tarball.

The dev/test stack needs a real OpenSearch (analyzers, ``_delete_by_query``, painless), but
the machines it runs on have Java 17 and Maven Central, not Docker. So the OpenSearch server
jar and the few module plugins we need are fetched from Maven Central by ``mvn`` (driven by
``opensearch-launcher/pom.xml``) and a tiny Java launcher, ``sidecar.OpenSearchLauncher``,
starts an in-process ``Node`` with those modules as classpath plugins.

This module only prepares the classpath and builds the ``java`` argv; spawning, logging and
readiness polling (``GET http://127.0.0.1:<port>/``) are the caller's job.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

__all__ = [
    "LAUNCHER_DIR",
    "MAIN_CLASS",
    "OPENSEARCH_VERSION",
    "OpenSearchBuildError",
    "command",
    "prepare",
]

OPENSEARCH_VERSION: str = "2.19.6"
"""Must equal ``opensearch.version`` in the pom; 2.19.x is the last line that runs on Java 17."""

LAUNCHER_DIR: Path = Path(__file__).resolve().parent / "opensearch-launcher"
"""The launcher project is package data of the tooling, beside this module."""

MAIN_CLASS = "sidecar.OpenSearchLauncher"

_POM = LAUNCHER_DIR / "pom.xml"
_SOURCE = LAUNCHER_DIR / "src" / "main" / "java" / "sidecar" / "OpenSearchLauncher.java"
_STAMP_NAME = "prepared.stamp"
_LOCK_NAME = ".prepare.lock"
_MVN_TIMEOUT_S = 1200.0
_JAVAC_TIMEOUT_S = 300.0
_TAIL_LINES = 40
_ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_HEAP_RE = re.compile(r"[1-9][0-9]*[kKmMgG]?")


class OpenSearchBuildError(RuntimeError):
    """The launcher's jars could not be resolved or the launcher did not compile.

    Raised instead of ``CalledProcessError`` so callers get one message that says what failed,
    what to try, and the end of the tool's own output.
    """


def _inputs_hash() -> str:
    """Hash everything that determines the cache contents, so edits invalidate the cache."""
    digest = hashlib.sha256()
    for path in (_POM, _SOURCE):
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise OpenSearchBuildError(
                f"cannot read {path}: {exc}; the opensearch-launcher/ project must sit at the "
                "repository root next to indexer/"
            ) from exc
        digest.update(path.name.encode())
        digest.update(b"\0")
        digest.update(data)
        digest.update(b"\0")
    digest.update(OPENSEARCH_VERSION.encode())
    return digest.hexdigest()


def _classpath(cache_dir: Path) -> list[Path]:
    """Classes dir first, then jars in a stable order, so argv is reproducible."""
    return [cache_dir / "classes", *sorted((cache_dir / "lib").glob("*.jar"))]


def _is_current(cache_dir: Path, stamp: str) -> bool:
    """True when an earlier prepare() with these inputs finished (the stamp is written last)."""
    try:
        recorded = (cache_dir / _STAMP_NAME).read_text(encoding="utf-8").strip()
    except OSError:
        return False
    main_class = cache_dir / "classes" / Path(*MAIN_CLASS.split(".")).with_suffix(".class")
    return recorded == stamp and main_class.is_file() and any((cache_dir / "lib").glob("*.jar"))


def _tail(output: str) -> str:
    """Last lines of a tool's output, without the colour codes mvn emits even under ``-B``."""
    lines = _ANSI_RE.sub("", output).strip().splitlines()
    return "\n".join(lines[-_TAIL_LINES:]) or "(no output)"


def _run(argv: list[str], what: str, hint: str, timeout_s: float) -> None:
    """Run a build tool, turning every way it can fail into an actionable OpenSearchBuildError."""
    try:
        result = subprocess.run(
            argv,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raw = exc.output
        out = raw.decode(errors="replace") if isinstance(raw, bytes) else (raw or "")
        raise OpenSearchBuildError(
            f"{what} timed out after {timeout_s:.0f}s. {hint}\n--- output tail ---\n{_tail(out)}"
        ) from exc
    except OSError as exc:
        raise OpenSearchBuildError(f"{what} could not be started: {exc}. {hint}") from exc
    if result.returncode != 0:
        raise OpenSearchBuildError(
            f"{what} failed (exit {result.returncode}). {hint}\n"
            f"command: {' '.join(argv)}\n--- output tail ---\n{_tail(result.stdout)}"
        )


def _require_tool(name: str, package: str) -> str:
    """Resolve a build tool up front; a missing one otherwise surfaces as a cryptic OSError."""
    path = shutil.which(name)
    if path is None:
        raise OpenSearchBuildError(
            f"`{name}` is not on PATH; it is needed to build the local OpenSearch launcher "
            f"(Debian: apt-get install {package})"
        )
    return path


def _build(cache_dir: Path) -> None:
    """Fetch the jars into ``lib/`` and compile the launcher into ``classes/`` from scratch.

    Both directories are wiped first: copy-dependencies never deletes jars, and a stale jar of
    another version on the classpath would mean two copies of the same classes (jar hell).
    """
    mvn = _require_tool("mvn", "maven")
    javac = _require_tool("javac", "openjdk-17-jdk-headless")
    lib = cache_dir / "lib"
    classes = cache_dir / "classes"
    for stale in (lib, classes):
        shutil.rmtree(stale, ignore_errors=True)
    _run(
        [
            mvn,
            "-B",
            "-q",
            "-Dstyle.color=never",
            "-f",
            str(_POM),
            "dependency:copy-dependencies",
            f"-DoutputDirectory={lib}",
            "-DincludeScope=runtime",
        ],
        what=f"Maven resolving OpenSearch {OPENSEARCH_VERSION} jars",
        hint=(
            "Check that Maven Central is reachable (proxy/mirror settings in ~/.m2/settings.xml) "
            f"and that every artifact in {_POM} exists at that version."
        ),
        timeout_s=_MVN_TIMEOUT_S,
    )
    server_jar = lib / f"opensearch-{OPENSEARCH_VERSION}.jar"
    if not server_jar.is_file():
        raise OpenSearchBuildError(
            f"Maven did not produce {server_jar.name}: opensearch.version in {_POM} and "
            f"OPENSEARCH_VERSION ({OPENSEARCH_VERSION}) in {__name__} must agree"
        )
    jars = sorted(lib.glob("*.jar"))
    classes.mkdir(parents=True, exist_ok=True)
    _run(
        [
            javac,
            "--release",
            "17",
            "-encoding",
            "UTF-8",
            "-nowarn",
            "-d",
            str(classes),
            "-cp",
            os.pathsep.join(str(jar) for jar in jars),
            str(_SOURCE),
        ],
        what="javac compiling the OpenSearch launcher",
        hint=f"A JDK 17+ is required and {_SOURCE.name} must match the OpenSearch API in {_POM}.",
        timeout_s=_JAVAC_TIMEOUT_S,
    )


def prepare(cache_dir: Path) -> list[Path]:
    """Make the launcher runnable from ``cache_dir`` and return its classpath.

    Idempotent and cheap when nothing changed: a stamp holding the hash of the pom and the Java
    source short-circuits mvn and javac (milliseconds instead of seconds). A file lock makes
    concurrent callers (parallel test workers) wait for one build instead of racing on ``lib/``.
    """
    cache_dir = cache_dir.resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    stamp = _inputs_hash()
    with (cache_dir / _LOCK_NAME).open("a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not _is_current(cache_dir, stamp):
            (cache_dir / _STAMP_NAME).unlink(missing_ok=True)
            _build(cache_dir)
            tmp = cache_dir / f"{_STAMP_NAME}.tmp"
            tmp.write_text(stamp + "\n", encoding="utf-8")
            tmp.replace(cache_dir / _STAMP_NAME)
        return _classpath(cache_dir)


def _java() -> str:
    """Prefer ``$JAVA_HOME`` (what the user chose), then PATH; the argv stays usable either way."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        candidate = Path(java_home) / "bin" / "java"
        if candidate.is_file():
            return str(candidate)
    return shutil.which("java") or "java"


def command(
    classpath: list[Path],
    home: Path,
    http_port: int,
    cluster_name: str,
    heap: str = "512m",
) -> list[str]:
    """Return the full ``java`` argv that starts the node; the caller spawns and supervises it.

    The JVM flags trade peak throughput for a small, fast-starting process: a fixed small heap,
    SerialGC (no GC threads, lowest footprint), and the system properties the distribution's
    jvm.options would have set (Netty without Unsafe/pooling, log4j without JMX and without its
    own shutdown hook, so the node can still log while it closes on SIGTERM).

    The parent circuit breaker counts reserved memory, not the heap's real use
    (``indices.breaker.total.use_real_memory=false``): SerialGC collects the old generation
    only when it is full, so the heap's real use sits near its size between collections and
    the real-memory breaker refused ``_bulk`` requests as "data too large" with the heap
    mostly garbage (a 1,000,000-message bench-tenants build stopped at 466,000, 4 GB heap).
    """
    if not _HEAP_RE.fullmatch(heap):
        raise ValueError(f"heap must look like 512m or 1g, got {heap!r}")
    if not 0 < http_port < 65536:
        raise ValueError(f"http_port out of range: {http_port}")
    home = home.resolve()
    return [
        _java(),
        f"-Xms{heap}",
        f"-Xmx{heap}",
        "-Xss1m",
        "-XX:+UseSerialGC",
        "-XX:+ExitOnOutOfMemoryError",
        "-XX:-UsePerfData",
        "-Djava.awt.headless=true",
        "-Dfile.encoding=UTF-8",
        "-Djava.locale.providers=SPI,COMPAT",
        "-Djna.nosys=true",
        "-Dio.netty.noUnsafe=true",
        "-Dio.netty.noKeySetOptimization=true",
        "-Dio.netty.recycler.maxCapacityPerThread=0",
        "-Dio.netty.allocator.numDirectArenas=0",
        "-Dlog4j.shutdownHookEnabled=false",
        "-Dlog4j2.disable.jmx=true",
        f"-Dopensearch.path.home={home}",
        "-cp",
        os.pathsep.join(str(entry) for entry in classpath),
        MAIN_CLASS,
        "--home",
        str(home),
        "--http-port",
        str(http_port),
        "--cluster-name",
        cluster_name,
        "--setting",
        "indices.breaker.total.use_real_memory=false",
    ]
