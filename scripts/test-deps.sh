#!/usr/bin/env bash
# What the test suite needs on this machine, installed or started when missing (idempotent, quick when present):
# Debian's chromium for the browser tests, PostgreSQL at 127.0.0.1:5432 with a database `test`, Redis at
# 127.0.0.1:6379, Debian's PgBouncer (the pooler test starts its own). Runs before `npm test` (the pretest script). Set SKIP_TEST_DEPS=1 to skip it (you provide them).
set -euo pipefail
[ "${SKIP_TEST_DEPS:-}" = 1 ] && exit 0

say() { printf 'test-deps: %s\n' "$*" >&2; }
apt_updated=
apt_install() {
  if [ "$(id -u)" != 0 ]; then
    say "missing: $*; install it (apt-get install $*) or run as root"
    exit 1
  fi
  if [ -z "$apt_updated" ]; then
    apt-get update -qq
    apt_updated=1
  fi
  say "installing $*"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Chromium (Debian's build; playwright-core drives it, nothing is downloaded).
command -v chromium >/dev/null 2>&1 || apt_install chromium

# PostgreSQL.
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
  command -v pg_ctlcluster >/dev/null 2>&1 || apt_install postgresql
  version="$(ls /etc/postgresql | sort -V | tail -n 1)"
  hba="/etc/postgresql/$version/main/pg_hba.conf"
  # A test machine: the suite connects as postgres over loopback without a password.
  if [ -w "$hba" ] && ! grep -q '^host all all 127.0.0.1/32 trust' "$hba"; then
    sed -i '1i host all all 127.0.0.1/32 trust\nhost all all ::1/128 trust' "$hba"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>/dev/null || pg_ctlcluster "$version" main reload || true
  for _ in $(seq 1 30); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 1; done
fi
pg_isready -q -h 127.0.0.1 -p 5432 || { say "PostgreSQL is not reachable at 127.0.0.1:5432"; exit 1; }
psql -h 127.0.0.1 -U postgres -d postgres -tAc "SELECT 1 FROM pg_database WHERE datname = 'test'" | grep -q 1 ||
  psql -h 127.0.0.1 -U postgres -d postgres -qc 'CREATE DATABASE test'

# Redis (keeps nothing on disk). The server binary is needed even when a Redis answers: the failover test starts two
# of its own (test/ops/redis-failover.test.ts).
command -v redis-server >/dev/null 2>&1 || apt_install redis-server
if ! redis-cli -h 127.0.0.1 ping >/dev/null 2>&1; then
  redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no >/dev/null
  for _ in $(seq 1 20); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.5; done
fi
redis-cli -h 127.0.0.1 ping >/dev/null || { say "Redis is not reachable at 127.0.0.1:6379"; exit 1; }

# PgBouncer's binary: test/ops/pgbouncer.test.ts runs its own, in transaction and in session mode.
[ -x /usr/sbin/pgbouncer ] || command -v pgbouncer >/dev/null 2>&1 || apt_install pgbouncer
