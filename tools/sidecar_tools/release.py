"""``make release``: everything an adopter consumes, built into one folder with its SHA-256 sums.

Why one tool: a release is only useful when its pieces agree — the wheel, the images built from
that wheel's lock, the chart whose default image tag is that version, the API document the
images serve and a client generated from it. Built together from one checkout, stamped with
one version and one commit, and listed in ``SHA256SUMS`` (``sha256sum -c SHA256SUMS``).

What lands in ``--out`` (``dist/``; emptied first):

- ``mail_search_sidecar-<v>-py3-none-any.whl`` and ``mail_search_sidecar-<v>.tar.gz``
  (``uv build``), with ``<wheel>.cdx.json``: a CycloneDX 1.5 SBOM of the runtime the wheel
  installs, exported from ``uv.lock`` (``uv export --format cyclonedx1.5``: the locked versions
  and their hashes, the same export the Dockerfile installs with ``--require-hashes``);
- per image (``--images full,slim,lambda``; ``--images ''`` builds none): the image built with
  podman and saved as an OCI archive ``mail-search-sidecar-<v>-<name>.oci.tar``, labelled
  ``org.opencontainers.image.{source,revision,version,licenses,title}``, and its SBOM
  ``….oci.tar.cdx.json`` (the image's Python environment: the lock's export for its
  ``EXTRAS``, plus the Lambda's runtime interface client; the Debian base is not in it). The
  labels are read back from the built image and must equal what was asked;
- ``mail-search-sidecar-<chart version>.tgz`` (``helm package``; its ``appVersion`` must be
  this version: it is the chart's default image tag);
- ``mail-search-sidecar-<v>-openapi.json`` (the document a production replica serves, as
  ``docs/reference/openapi.json``) and the Python client generated from it with
  openapi-python-client, built as ``mail_search_sidecar_client-<v>`` wheel and sdist;
- ``release.json`` (version, commit, source, each artifact, each image's tag and labels) and
  ``SHA256SUMS`` over every other file.

Images are the slow part (minutes each on a small machine, cold): ``--images`` picks them, and
``--python-image`` the base (``python:3.11-slim-bookworm`` by default; the test suite's
debootstrapped ``localhost/bookworm-python`` where no registry is reachable).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "deploy" / "helm" / "mail-search-sidecar"
LAMBDA_DOCKERFILE = ROOT / "deploy" / "cdk" / "lambda" / "Dockerfile"
IMAGE_REPO = "localhost/mail-search-sidecar"
IMAGE_NAMES = ("full", "slim", "lambda")
# The Dockerfile's own default: sentence-transformers (and torch behind it) is pruned from
# every export that has no `torch` extra; the SBOM must describe what the image installs.
PRUNE = ("--prune", "sentence-transformers")
CLIENT_PACKAGE = "mail_search_sidecar_client"


class ReleaseError(RuntimeError):
    """A step failed; ``str()`` says which and why (printed as one line, exit 1)."""


@dataclass(frozen=True)
class Project:
    """What every artifact is stamped with."""

    name: str
    version: str
    license: str
    revision: str
    dirty: bool
    source: str

    def labels(self, title: str) -> dict[str, str]:
        """The OCI annotations every image carries (the image spec's pre-defined keys)."""
        return {
            "org.opencontainers.image.source": self.source,
            "org.opencontainers.image.revision": self.revision,
            "org.opencontainers.image.version": self.version,
            "org.opencontainers.image.licenses": self.license,
            "org.opencontainers.image.title": title,
        }


@dataclass(frozen=True)
class ImageSpec:
    """One image of the release: how it is built and what its SBOM exports."""

    name: str
    extras: tuple[str, ...]
    dockerfile: Path = ROOT / "Dockerfile"
    build_args: dict[str, str] = field(default_factory=dict)


def run(args: Sequence[str | Path], *, cwd: Path = ROOT, env: dict[str, str] | None = None,
        timeout: float = 600) -> str:
    """Run a command; its stdout, or :class:`ReleaseError` with the end of its output."""
    try:
        done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True,
                              text=True, timeout=timeout, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ReleaseError(f"{Path(str(args[0])).name}: {exc}") from exc
    if done.returncode != 0:
        raise ReleaseError(f"{' '.join(str(a) for a in args[:4])}… exited {done.returncode}: "
                           f"{(done.stdout + done.stderr)[-2000:]}")
    return done.stdout


def venv_tool(name: str) -> Path:
    """A console script of the environment this runs in (uv, openapi-python-client)."""
    return Path(sys.executable).with_name(name)


def project(source: str | None) -> Project:
    """Name, version and license from pyproject.toml; the commit and origin from git."""
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    revision = run(["git", "rev-parse", "HEAD"]).strip()
    dirty = bool(run(["git", "status", "--porcelain", "--untracked-files=no"]).strip())
    if not source:
        source = os.environ.get("SIDECAR_RELEASE_SOURCE") or _origin()
    if not source:
        raise ReleaseError("no source URL for the images' org.opencontainers.image.source: "
                           "pass SOURCE=<repository URL> (or add a git remote 'origin')")
    return Project(name=meta["name"], version=meta["version"], license=meta["license"],
                   revision=revision, dirty=dirty, source=source)


def _origin() -> str:
    """The origin remote as an https URL (``git@host:o/r.git`` → ``https://host/o/r``)."""
    done = subprocess.run(["git", "remote", "get-url", "origin"], cwd=ROOT, capture_output=True,
                          text=True, check=False)
    url = done.stdout.strip() if done.returncode == 0 else ""
    scp = re.fullmatch(r"git@([^:]+):(.+?)(\.git)?", url)
    if scp:
        return f"https://{scp.group(1)}/{scp.group(2)}"
    return url.removesuffix(".git")


def build_dists(out: Path) -> Path:
    """The sdist and the wheel of the runtime package (not the tooling); the wheel's path."""
    run([venv_tool("uv"), "build", "--package", "mail-search-sidecar", "--out-dir", out])
    (out / ".gitignore").unlink(missing_ok=True)  # uv writes one into its --out-dir: not ours
    wheels = sorted(out.glob("mail_search_sidecar-*.whl"))
    if len(wheels) != 1:
        raise ReleaseError(f"expected one wheel in {out}, found {[w.name for w in wheels]}")
    return wheels[0]


def sbom(target: Path, extras: Sequence[str], *, properties: dict[str, str] | None = None,
         extra_components: Sequence[tuple[str, str]] = ()) -> None:
    """A CycloneDX SBOM of the locked runtime with ``extras`` (what the Dockerfile's export
    installs), written to ``target``. ``properties`` go to its metadata (an image's labels);
    ``extra_components`` are (name, version) pairs installed beside the lock's packages (the
    Lambda's runtime interface client), listed as PyPI components."""
    args: list[str | Path] = [venv_tool("uv"), "export", "--frozen", "--no-dev",
                              "--no-emit-workspace", "--package", "mail-search-sidecar",
                              "--format", "cyclonedx1.5", *PRUNE, "-o", target]
    for extra in extras:
        args += ["--extra", extra]
    run(args)
    doc: dict[str, Any] = json.loads(target.read_text(encoding="utf-8"))
    root = doc["metadata"]["component"]
    license_id = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))[
        "project"]["license"]
    root.setdefault("licenses", [{"license": {"id": license_id}}])
    root.setdefault("purl", f"pkg:pypi/{root['name']}@{root['version']}")
    if properties:
        doc["metadata"]["properties"] = [{"name": k, "value": v} for k, v in properties.items()]
    for name, version in extra_components:
        ref = f"{name}@{version}"
        doc["components"].append({"type": "library", "bom-ref": ref, "name": name,
                                  "version": version, "purl": f"pkg:pypi/{ref}"})
    target.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")


def lambda_pins() -> list[tuple[str, str]]:
    """The packages the Lambda Dockerfile installs on top of the image (``name==version``)."""
    text = LAMBDA_DOCKERFILE.read_text(encoding="utf-8")
    pins = [(m.group(1), m.group(2)) for line in text.splitlines()
            if re.match(r"\s*RUN pip install", line)
            for m in re.finditer(r"([A-Za-z0-9_.-]+)==([A-Za-z0-9_.+-]+)", line)]
    if not pins:
        raise ReleaseError(f"{LAMBDA_DOCKERFILE}: no pinned `pip install` found")
    return pins


def images(names: Sequence[str], python_image: str) -> list[ImageSpec]:
    """The specs of the images asked for, in build order (the Lambda's base, slim, first)."""
    unknown = set(names) - set(IMAGE_NAMES)
    if unknown:
        raise ReleaseError(f"unknown image(s) {sorted(unknown)}: choose from {IMAGE_NAMES}")
    if "lambda" in names and "slim" not in names:
        raise ReleaseError("the lambda image is built FROM the slim one: ask for both")
    base = {"PYTHON_IMAGE": python_image}
    specs = {
        "slim": ImageSpec("slim", (), build_args=base | {"EXTRAS": ""}),
        "full": ImageSpec("full", ("vectors",),
                          build_args=base | {"EXTRAS": "vectors", "ONNX_FROM": "context"}),
        "lambda": ImageSpec("lambda", (), dockerfile=LAMBDA_DOCKERFILE),
    }
    return [specs[n] for n in ("slim", "full", "lambda") if n in names]


def _tag(version: str, name: str) -> str:
    return f"{IMAGE_REPO}:{version}" if name == "full" else f"{IMAGE_REPO}:{version}-{name}"


def export_onnx_graph() -> None:
    """The model's ONNX graph into build/onnx (``ONNX_FROM=context``), exported with the dev
    environment's torch, as tests/integration/test_image.py does; no torch in the build."""
    out = ROOT / "build" / "onnx"
    printed = run([sys.executable, "-m", "indexer.cli.main", "export-onnx", "--out", out],
                  env={**os.environ, "HF_HUB_OFFLINE": "1"})
    graph = Path(printed.strip().splitlines()[-1]).resolve()
    for stale in out.glob("*.onnx"):  # other weights' graphs would only weigh on the image
        if stale.resolve() != graph:
            stale.unlink()


def build_image(spec: ImageSpec, proj: Project, out: Path, podman: str) -> dict[str, Any]:
    """Build, check the labels, save as an OCI archive, write its SBOM; its manifest entry."""
    tag = _tag(proj.version, spec.name)
    labels = proj.labels(f"{proj.name} ({spec.name})")
    args: list[str | Path] = [podman, "build", "--network", "host", "-f", spec.dockerfile,
                              "-t", tag]
    build_args = dict(spec.build_args)
    if spec.name == "lambda":
        build_args["SIDECAR_IMAGE"] = _tag(proj.version, "slim")
    for key, value in build_args.items():
        args += ["--build-arg", f"{key}={value}"]
    for key, value in labels.items():
        args += ["--label", f"{key}={value}"]
    ca = os.environ.get("PIP_CERT") or os.environ.get("SSL_CERT_FILE")
    if ca and Path(ca).is_file():  # the registries' TLS chain needs this machine's bundle
        args += ["-v", f"{ca}:/run/host-ca.pem:ro", "--build-arg", "PIP_CERT=/run/host-ca.pem",
                 "--build-arg", "SSL_CERT_FILE=/run/host-ca.pem"]
    run([*args, ROOT], timeout=3600)
    found = json.loads(run([podman, "image", "inspect", tag, "--format", "{{json .Labels}}"]))
    wrong = {k: (found.get(k), v) for k, v in labels.items() if found.get(k) != v}
    if wrong:
        raise ReleaseError(f"{tag}: labels not as built (found, wanted): {wrong}")
    archive = out / f"{proj.name}-{proj.version}-{spec.name}.oci.tar"
    run([podman, "save", "--format", "oci-archive", "-o", archive, tag], timeout=1200)
    extra = lambda_pins() if spec.name == "lambda" else []
    sbom(out / f"{archive.name}.cdx.json", spec.extras,
         properties=labels | {"image": tag}, extra_components=extra)
    return {"name": spec.name, "tag": tag, "archive": archive.name, "labels": labels,
            "sbom": f"{archive.name}.cdx.json"}


def helm() -> str:
    """The pinned helm (scripts/ensure-deploy-tools.sh, built once per machine)."""
    printed = run(["bash", ROOT / "scripts" / "ensure-deploy-tools.sh", "--print-env"],
                  timeout=1800)
    found = dict(line.split("=", 1) for line in printed.splitlines() if "=" in line)
    return found["SIDECAR_HELM"]


def package_chart(proj: Project, out: Path) -> Path:
    """``helm package`` of the chart; its appVersion (the default image tag) must be ours."""
    chart = _chart_yaml(CHART / "Chart.yaml")
    if chart.get("appVersion") != proj.version:
        raise ReleaseError(f"Chart.yaml appVersion {chart.get('appVersion')!r} is not the "
                           f"release's version {proj.version!r} (the chart's default image tag)")
    run([helm(), "package", CHART, "--destination", out])
    return out / f"{chart['name']}-{chart['version']}.tgz"


def _chart_yaml(path: Path) -> dict[str, str]:
    """The chart's top-level scalar fields (name, version, appVersion): no YAML library in the
    runtime, and these are plain ``key: value`` lines."""
    found: dict[str, str] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        m = re.fullmatch(r"([A-Za-z]+):\s*(\S.*?)\s*", line)
        if m:
            found[m.group(1)] = m.group(2).strip("\"'")
    return found


def openapi_and_client(proj: Project, out: Path) -> list[Path]:
    """The API's document as a production replica serves it, and a client generated from it
    and built as a wheel and an sdist (openapi-python-client, its ``uv`` project layout)."""
    from sidecar_tools.refdocs.api_page import spec_json

    document = out / f"{proj.name}-{proj.version}-openapi.json"
    document.write_text(spec_json(), encoding="utf-8")
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "config.yaml"
        config.write_text(f"project_name_override: {proj.name}-client\n"
                          f"package_name_override: {CLIENT_PACKAGE}\n"
                          f"package_version_override: {proj.version}\n", encoding="utf-8")
        client = Path(tmp) / "client"
        # The generator formats its output with ruff: the environment's, beside this Python.
        env = {**os.environ,
               "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
        said = run([venv_tool("openapi-python-client"), "generate", "--path", document,
                    "--meta", "uv", "--config", config, "--output-path", client], env=env)
        if "Warning" in said:  # a skipped endpoint or model: the client would lack it
            raise ReleaseError(f"openapi-python-client warned: {said[-2000:]}")
        before = set(out.iterdir())
        run([venv_tool("uv"), "build", "--out-dir", out, client])
        (out / ".gitignore").unlink(missing_ok=True)  # uv writes it into any folder lacking one
    return [document, *sorted(set(out.iterdir()) - before)]


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_sums(out: Path) -> Path:
    """``SHA256SUMS`` over every other file of ``out``, in ``sha256sum -c``'s format."""
    sums = out / "SHA256SUMS"
    lines = [f"{sha256(p)}  {p.name}\n" for p in sorted(out.iterdir())
             if p.is_file() and p != sums]
    sums.write_text("".join(lines), encoding="utf-8")
    return sums


def release(out: Path, image_names: Sequence[str], *, source: str | None = None,
            python_image: str = "python:3.11-slim-bookworm", podman: str = "podman",
            say: Any = print) -> dict[str, Any]:
    """Build the whole release into ``out`` (emptied first); its manifest."""
    proj = project(source)
    specs = images(image_names, python_image)
    if specs and not shutil.which(podman):
        raise ReleaseError(f"no {podman}: run 'bash scripts/ensure-image-tools.sh' (as root), "
                           "or IMAGES= to skip the images")
    if proj.dirty:
        say(f"release: the working tree has uncommitted changes; revision {proj.revision} "
            "does not describe them all (release.json: dirty)")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    wheel = build_dists(out)
    sbom(out / f"{wheel.name}.cdx.json", ())
    say(f"release: {wheel.name} and its SBOM")
    built = []
    if any(s.name == "full" for s in specs):
        export_onnx_graph()
    for spec in specs:
        say(f"release: building image {spec.name} (podman)")
        built.append(build_image(spec, proj, out, podman))
    chart = package_chart(proj, out)
    say(f"release: {chart.name}")
    api = openapi_and_client(proj, out)
    say(f"release: {', '.join(p.name for p in api)}")
    manifest: dict[str, Any] = {
        "name": proj.name, "version": proj.version, "revision": proj.revision,
        "dirty": proj.dirty, "source": proj.source, "licenses": proj.license,
        "images": built,
    }
    (out / "release.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    manifest["artifacts"] = sorted(p.name for p in out.iterdir())
    write_sums(out)
    say(f"release: {len(manifest['artifacts'])} files and SHA256SUMS in {out}")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sidecar_tools.release",
                                     description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=ROOT / "dist",
                        help="the release folder (emptied first; default dist/)")
    parser.add_argument("--images", default=",".join(IMAGE_NAMES),
                        help="comma-separated images to build: full, slim, lambda ('' none)")
    parser.add_argument("--source", default=None,
                        help="repository URL for org.opencontainers.image.source "
                             "(default: $SIDECAR_RELEASE_SOURCE, else git's origin)")
    parser.add_argument("--python-image", default="python:3.11-slim-bookworm",
                        help="the images' base (the Dockerfile's PYTHON_IMAGE)")
    parser.add_argument("--podman", default="podman", help="the image builder's command")
    ns = parser.parse_args(argv)
    names = [n for n in ns.images.replace(" ", "").split(",") if n]
    try:
        release(ns.out.resolve(), names, source=ns.source, python_image=ns.python_image,
                podman=ns.podman)
    except ReleaseError as exc:
        print(f"release: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
