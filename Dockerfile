# Authoric server image. No Docker engine was available on the machine this was written on,
# so it has not been built there; it follows the same steps as scripts/setup. Smoke test:
#   docker build -t authoric . && docker run --rm -p 8000:8000 -e DATABASE_URL=... authoric
#   curl -fsS localhost:8000/readyz
# docs/operations.md#container says what to set (DATABASE_URL, secrets, /data).
FROM python:3.11-slim

ENV PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    AUTHORIC_DATA_DIR=/data

WORKDIR /srv/authoric
COPY requirements.lock pyproject.toml README.md ./
RUN pip install --no-cache-dir -r requirements.lock
COPY platform ./platform
COPY migrations ./migrations
COPY policies ./policies
# Editable, like scripts/setup: the server finds migrations/ and policies/ next to its source.
RUN pip install --no-cache-dir --no-deps -e .

# Run unprivileged. /data holds generated secrets (when not given in the environment) and,
# without DATABASE_URL, the embedded PostgreSQL cluster.
RUN useradd --system --create-home --home-dir /home/authoric authoric \
    && mkdir -p /data && chown authoric:authoric /data
USER authoric
VOLUME ["/data"]
EXPOSE 8000

# Liveness only (no database access); use /readyz for the load balancer's readiness.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
    CMD ["python", "-c", "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:8000/healthz', timeout=2); sys.exit(0)"]

# SIGTERM (docker stop) drains: streams end, requests in flight finish within
# AUTHORIC_SHUTDOWN_GRACE (8 s, under docker stop's 10 s), exit 0.
STOPSIGNAL SIGTERM
CMD ["authoric", "serve", "--host", "0.0.0.0", "--port", "8000"]
