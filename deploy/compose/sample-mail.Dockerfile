# syntax=docker/dockerfile:1
# The sample-mail loader of deploy/compose/sample-mail.yml: the store writer (`sidecar load`,
# from the tools distribution, which the service image never holds) with the 40-email sample
# mailbox, so the compose stack has mail to search. Built from the repository root:
#   docker build -f deploy/compose/sample-mail.Dockerfile -t mail-search-sidecar-sample:dev .
# The runtime comes from uv.lock with hashes (no extra: the writer needs no encoder), then the
# sidecar's and the tools' wheels with --no-deps: `sidecar load` imports neither moto nor any
# other tooling dependency (tests/integration/test_image.py runs it against the local stack).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
ARG PIP_CERT
ARG SSL_CERT_FILE
RUN pip install --no-cache-dir uv==0.13.8
WORKDIR /src
COPY pyproject.toml uv.lock README.md ./
COPY tools tools
RUN uv export --frozen --no-dev --no-emit-workspace --format requirements-txt \
        -o /out/requirements.txt
COPY indexer indexer
COPY search_api search_api
RUN uv build --wheel --all-packages --out-dir /out/dist

FROM ${PYTHON_IMAGE}
ARG PIP_CERT
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
COPY --from=build /out/requirements.txt /tmp/build/requirements.txt
RUN pip install --no-cache-dir --require-hashes -r /tmp/build/requirements.txt --no-deps
COPY --from=build /out/dist /tmp/build/dist
RUN pip install --no-cache-dir --no-deps /tmp/build/dist/*.whl \
 && rm -rf /tmp/build \
 && useradd --create-home --uid 10001 sidecar
COPY tools/sidecar_tools/demo_data/sample-mailbox.jsonl /opt/sample/sample-mailbox.jsonl
USER sidecar
WORKDIR /home/sidecar
CMD ["sidecar", "load", "/opt/sample/sample-mailbox.jsonl", "--mailbox", "demo@example.com"]
