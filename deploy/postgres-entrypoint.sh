#!/bin/sh
# First start on an empty volume: initdb, then a login role POSTGRES_USER owning the database
# POSTGRES_DB, reached over the network with POSTGRES_PASSWORD (scram-sha-256). Then postgres.
set -eu
: "${POSTGRES_PASSWORD:?set POSTGRES_PASSWORD}"
USER_NAME=${POSTGRES_USER:-authoric}
DB_NAME=${POSTGRES_DB:-$USER_NAME}
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  initdb --pgdata="$PGDATA" --username=postgres --encoding=UTF8 --auth-local=peer \
    --auth-host=scram-sha-256 >/dev/null
  echo "host all all 0.0.0.0/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  echo "host all all ::/0 scram-sha-256" >> "$PGDATA/pg_hba.conf"
  pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses=''" --wait --silent start
  psql --quiet --username=postgres --dbname=postgres --set=ON_ERROR_STOP=1 \
    --set=user="$USER_NAME" --set=db="$DB_NAME" --set=password="$POSTGRES_PASSWORD" <<'SQL'
CREATE ROLE :"user" LOGIN PASSWORD :'password';
CREATE DATABASE :"db" OWNER :"user";
SQL
  pg_ctl --pgdata="$PGDATA" --wait --silent stop
fi
exec postgres -c listen_addresses='*' "$@"
