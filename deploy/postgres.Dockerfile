# PostgreSQL 15 from Debian's own package, on the same local base as the server image
# (scripts/image-base), for compose.yaml where no registry image can be pulled. Anywhere one can,
# the official postgres image does the same job.
ARG BASE=authoric-base:bookworm
FROM ${BASE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
    && rm -rf /var/lib/apt/lists/* \
    && mkdir -p /var/lib/postgresql/data /run/postgresql \
    && chown -R postgres:postgres /var/lib/postgresql /run/postgresql
COPY postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
USER postgres
VOLUME ["/var/lib/postgresql/data"]
EXPOSE 5432
STOPSIGNAL SIGINT
HEALTHCHECK --interval=2s --timeout=3s --retries=30 CMD ["pg_isready", "-h", "127.0.0.1", "-q"]
ENTRYPOINT ["postgres-entrypoint"]
