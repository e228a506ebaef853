# syntax=docker/dockerfile:1
# The image of each uep process, chosen by the build argument SERVICE: gateway, scheduler, inference, scorer,
# judge, reporter, or admin (uep-admin: migrations, topics and the built-in catalogue, run as a Job). The CPU
# Triton model server has its own deploy/model-server/Dockerfile (another base and a pip resolve of its own).
# Build from the REPOSITORY ROOT (the build context must contain pyproject.toml and uv.lock):
#   docker build --build-arg SERVICE=gateway -t uep-gateway .
#   docker build --build-arg SERVICE=admin --build-arg MEMBER=libs/common -t uep-admin .
#
# SECURITY (scorer): the scorer runs UNTRUSTED benchmark and model code (e.g. HumanEval programs) in a bubblewrap
# sandbox (uep_common.sandbox, docs/scorer-sandbox.md): its image gets Debian's bubblewrap and libseccomp2, and so
# does inference's, whose agent tools (python, sql; docs/design/agents.md) run model-written code in it. bwrap
# needs unprivileged user namespaces: the container's seccomp/AppArmor profile must allow unshare(CLONE_NEWUSER)
# (Docker's and Kubernetes' RuntimeDefault profiles do not; use a profile that does, the sandbox adds its own
# seccomp filter inside). Without them the scorer logs an ERROR at start-up and code items score
# 'sandbox_unavailable' - it never falls back to running code unisolated unless UEP_SANDBOX_MODE=unsafe_process.
# Its image stays minimal: nothing but the base image, those two packages and the locked runtime dependencies of
# uep-scorer - no compilers, no extra tools, no credentials baked in, and pip removed. Every image runs as a
# non-root uid with the venv root-owned and read-only to it. Deploy the scorer with a read-only root file system,
# a writable emptyDir /tmp, no service-account token and egress limited to Kafka/PostgreSQL/Redis/OTLP.
ARG PYTHON_IMAGE=python:3.11-slim
ARG SERVICE=gateway

# ---- builder: resolve exactly what uv.lock pins for the service's package (no dev group) into /app/.venv.
# MEMBER is the workspace member holding it; the admin image is uep-common with its builtin-data extra (the files
# `uep-admin seed` reads).
FROM ${PYTHON_IMAGE} AS builder
ARG SERVICE
ARG MEMBER=services/${SERVICE}
ARG UV_VERSION=0.13.9
RUN pip install --no-cache-dir "uv==${UV_VERSION}"
ENV UV_PROJECT_ENVIRONMENT=/app/.venv UV_PYTHON_DOWNLOADS=never UV_COMPILE_BYTECODE=1 UV_LINK_MODE=copy
WORKDIR /src
# Third-party dependencies first (cached until uv.lock or a manifest changes): only the manifests are needed.
COPY pyproject.toml uv.lock ./
COPY libs/common/pyproject.toml libs/common/
COPY ${MEMBER}/pyproject.toml ${MEMBER}/
RUN --mount=type=cache,target=/root/.cache/uv \
    if [ "$SERVICE" = admin ]; then set -- --package uep-common --extra builtin-data; else set -- --package "uep-$SERVICE"; fi \
 && uv sync --frozen --no-dev "$@" --no-install-workspace
# Then the workspace members themselves, installed as wheels (--no-editable): the runtime needs no source tree.
COPY libs/common libs/common
COPY ${MEMBER} ${MEMBER}
RUN --mount=type=cache,target=/root/.cache/uv \
    if [ "$SERVICE" = admin ]; then set -- --package uep-common --extra builtin-data; else set -- --package "uep-$SERVICE"; fi \
 && uv sync --frozen --no-dev "$@" --no-editable

# ---- runtime: same base image (the venv's interpreter link points at /usr/local/bin/python3.11), non-root.
# The reporter gets Debian's Chromium for the PDF reports (Playwright drives /usr/bin/chromium; it never
# downloads a browser); the scorer and inference bubblewrap and libseccomp2, and no package installer.
FROM ${PYTHON_IMAGE} AS runtime
ARG SERVICE
# hadolint ignore=SC2086
RUN case "$SERVICE" in \
      reporter) packages="chromium fonts-dejavu-core" ;; \
      scorer|inference) packages="bubblewrap libseccomp2" ;; \
      *) packages="" ;; \
    esac \
 && if [ -n "$packages" ]; then \
      apt-get update -q \
      && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $packages \
      && rm -rf /var/lib/apt/lists/*; \
    fi \
 && if [ "$SERVICE" = scorer ]; then python -m pip uninstall --yes --quiet pip setuptools wheel; fi \
 && groupadd --system --gid 10001 uep \
 && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin uep
COPY --from=builder /app/.venv /app/.venv
ENV PATH=/app/.venv/bin:$PATH UEP_HEALTH_HOST=0.0.0.0 PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /app
USER 10001:10001

# ---- what each image runs: its command, port and health check
FROM runtime AS gateway
ENV UEP_GATEWAY_HOST=0.0.0.0
EXPOSE 8080
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % (os.environ.get('UEP_GATEWAY_PORT') or 8080), timeout=2)"]
CMD ["uep-gateway"]

FROM runtime AS scheduler
EXPOSE 8091
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % (os.environ.get('UEP_HEALTH_PORT') or 8091), timeout=2)"]
CMD ["uep-scheduler"]

FROM runtime AS inference
EXPOSE 8092
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % (os.environ.get('UEP_HEALTH_PORT') or 8092), timeout=2)"]
CMD ["uep-inference"]

FROM runtime AS scorer
EXPOSE 8093
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % (os.environ.get('UEP_HEALTH_PORT') or 8093), timeout=2)"]
CMD ["uep-scorer"]

FROM runtime AS judge
EXPOSE 8094
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % (os.environ.get('UEP_HEALTH_PORT') or 8094), timeout=2)"]
CMD ["uep-judge"]

# With the root file system read-only, Chromium writes only under /tmp (HOME), an emptyDir in the manifest.
FROM runtime AS reporter
ENV UEP_CHROMIUM_PATH=/usr/bin/chromium HOME=/tmp XDG_CONFIG_HOME=/tmp/.config XDG_CACHE_HOME=/tmp/.cache
EXPOSE 8095
HEALTHCHECK --interval=15s --timeout=3s --start-period=30s --retries=3 \
  CMD ["python", "-c", "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % (os.environ.get('UEP_HEALTH_PORT') or 8095), timeout=2)"]
CMD ["uep-reporter"]

# A one-shot CLI, not a server: nothing to EXPOSE and no health endpoint.
FROM runtime AS admin
HEALTHCHECK NONE
ENTRYPOINT ["uep-admin"]
CMD ["--help"]

# ---- the image: the stage named by SERVICE
FROM ${SERVICE}
