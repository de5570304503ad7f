#!/bin/sh
# The parts of docker-library/postgres' entrypoint the stack relies on: first start initialises PGDATA
# with the superuser, password and database from the environment and runs /docker-entrypoint-initdb.d/*.sh;
# later starts reuse it (the volume).
set -eu
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA" /var/run/postgresql
  chown postgres:postgres "$PGDATA" /var/run/postgresql
  chmod 0700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  : "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set, as the official image requires}"
  user="${POSTGRES_USER:-postgres}"
  db="${POSTGRES_DB:-$user}"
  pwfile="$(mktemp)"
  printf '%s\n' "$POSTGRES_PASSWORD" > "$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  # As the official image: every TCP client must give the password.
  printf 'host all all all scram-sha-256\n' >> "$PGDATA/pg_hba.conf"
  printf "listen_addresses = '*'\n" >> "$PGDATA/postgresql.conf"
  # As the official image: a socket-only server for the database and /docker-entrypoint-initdb.d/*.sh
  # (sourced, as the official image sources a script that is not executable), then the real start.
  pg_ctl -D "$PGDATA" -o "-c listen_addresses='' -c unix_socket_directories=/var/run/postgresql" -w start >/dev/null
  if [ "$db" != postgres ]; then
    psql -v ON_ERROR_STOP=1 --username "$user" --dbname postgres -c "CREATE DATABASE \"$db\"" >/dev/null
  fi
  for f in /docker-entrypoint-initdb.d/*.sh; do
    [ -e "$f" ] || continue
    echo "running $f"
    . "$f"
  done
  pg_ctl -D "$PGDATA" -m fast -w stop >/dev/null
  echo "initialised $PGDATA for user $user, database $db"
fi
exec "$@"
