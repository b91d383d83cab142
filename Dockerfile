# Authoric server image, in three stages on one Debian bookworm base:
#   console  builds the admin console (Node from requirements-node.lock; Vite needs Node 20.19+,
#            newer than bookworm's) with the same `scripts/console build` as a checkout;
#   build    installs the runtime lock (hashed) and Authoric itself (non-editable: migrations/
#            and policies/ go inside the package, next to the console) into /opt/authoric;
#   runtime  Debian's python3 and that venv only: no compiler, no Node, no dev tools.
# BASE defaults to the local image scripts/image-base makes with debootstrap (no registry);
# with a registry, `--build-arg BASE=debian:bookworm-slim` is the same thing.
# Build and check: scripts/image-check (docs/operations.md#container).
ARG BASE=authoric-base:bookworm

FROM ${BASE} AS console
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY requirements-node.lock ./
COPY scripts/console scripts/console
COPY console console
# The console bundles @authoric/client from its sources (console/package.json: file:../clients/typescript).
COPY clients/typescript clients/typescript
RUN scripts/console build

FROM ${BASE} AS build
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
       python3 python3-venv ca-certificates \
    && rm -rf /var/lib/apt/lists/*
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1
RUN python3 -m venv /opt/authoric
WORKDIR /src
COPY requirements.lock ./
RUN /opt/authoric/bin/pip install --require-hashes -r requirements.lock
COPY pyproject.toml setup.py MANIFEST.in README.md ./
COPY platform platform
COPY migrations migrations
COPY policies policies
COPY --from=console /src/platform/authoric/console_dist platform/authoric/console_dist
# No scripts/console here, so the build hook takes the console built above as it is.
RUN /opt/authoric/bin/pip install --no-deps . \
    && /opt/authoric/bin/pip uninstall --yes pip

FROM ${BASE} AS runtime
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends python3 \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --create-home --home-dir /home/authoric authoric \
    && mkdir -p /data && chown authoric:authoric /data
COPY --from=build /opt/authoric /opt/authoric
ENV PATH=/opt/authoric/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    AUTHORIC_DATA_DIR=/data
WORKDIR /home/authoric
# Run unprivileged. /data holds generated secrets (when not given in the environment) and,
# without DATABASE_URL, the embedded PostgreSQL cluster.
USER authoric
VOLUME ["/data"]
EXPOSE 8000

# Liveness only (no database access); use /readyz for the load balancer's readiness.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python3", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2)"]

# SIGTERM (docker stop) drains: streams end, requests in flight finish within
# AUTHORIC_SHUTDOWN_GRACE (8 s, under docker stop's 10 s), exit 0.
STOPSIGNAL SIGTERM
CMD ["authoric", "serve", "--host", "0.0.0.0", "--port", "8000"]
