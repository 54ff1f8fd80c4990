#!/usr/bin/env bash
# Starts the database servers the test suites use, installing them from Debian's packages when missing, and
# installs Debian's Chromium for the dashboard's browser test (playwright-core drives /usr/bin/chromium; it
# never downloads a browser), Debian's PgBouncer (the PostgreSQL tests behind a pooler start private ones of
# their own; the package's own service is not needed), and what `pnpm scale` needs: iproute2 (hosts as network
# namespaces) and iputils-arping (the promoted standby announces the floating address with gratuitous ARP, as
# keepalived does). Idempotent: a server that already answers is left alone. Everything listens
# on 127.0.0.1 only.
#   PostgreSQL: 127.0.0.1:5432, user postgres (password "postgres" where password auth is in force)
#   MariaDB:    127.0.0.1:3306, user root with an empty password
#   RabbitMQ:   127.0.0.1:5672, guest/guest (the broker path: @statusq/broker-rabbitmq)
#   NATS:       127.0.0.1:4222 with JetStream (the broker path: @statusq/broker-nats)
set -euo pipefail

apt_updated=0
apt_install() {
  if [ "$apt_updated" = 0 ]; then apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

wait_for() { # what, seconds, command...
  local what=$1 seconds=$2; shift 2
  for _ in $(seq 1 "$seconds"); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 1
  done
  echo "services: $what did not come up within ${seconds}s" >&2
  return 1
}

start_postgres() {
  if command -v pg_isready >/dev/null && pg_isready -h 127.0.0.1 -p 5432 -q; then
    echo "services: PostgreSQL already running"
  else
    command -v pg_ctlcluster >/dev/null || apt_install postgresql
    local version
    version=$(ls /etc/postgresql | sort -V | tail -n 1)
    [ -d "/etc/postgresql/$version/main" ] || pg_createcluster "$version" main >/dev/null
    pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
    wait_for PostgreSQL 60 pg_isready -h 127.0.0.1 -p 5432 -q
    echo "services: PostgreSQL $version started"
  fi
  # A fresh cluster authenticates TCP users by password; give the postgres user a known one.
  su postgres -c "psql -qAtc \"ALTER USER postgres PASSWORD 'postgres'\"" >/dev/null 2>&1 || true
}

mariadb_answers() { mariadb -h 127.0.0.1 -P 3306 -uroot -e 'SELECT 1'; }

start_mariadb() {
  if command -v mariadb >/dev/null && mariadb_answers >/dev/null 2>&1; then
    echo "services: MariaDB already running"
    return 0
  fi
  command -v mariadbd >/dev/null || [ -x /usr/sbin/mariadbd ] || apt_install mariadb-server
  mkdir -p /run/mysqld && chown mysql:mysql /run/mysqld
  if ! mariadb-admin ping --silent >/dev/null 2>&1; then
    # By pid file: private servers of the tests (mariadbd too) must not pass for this one.
    start-stop-daemon --start --oknodo --background --pidfile /run/mysqld/mysqld.pid --exec /usr/sbin/mariadbd
  fi
  wait_for MariaDB 60 mariadb-admin ping --silent
  # Debian's root logs in through the unix socket only; tests connect over TCP with an empty password.
  if ! mariadb_answers >/dev/null 2>&1; then
    mariadb -uroot -e "ALTER USER 'root'@'localhost' IDENTIFIED VIA unix_socket OR mysql_native_password USING PASSWORD('');
      CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED BY ''; GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;"
  fi
  wait_for "MariaDB over TCP" 30 mariadb_answers
  echo "services: MariaDB started"
}

# pnpm scale makes test hosts with network namespaces and veth links (iproute2's ip).
ensure_iproute() {
  if command -v ip >/dev/null && ip netns list >/dev/null 2>&1; then
    echo "services: iproute2 already installed"
  else
    apt_install iproute2
    echo "services: iproute2 installed"
  fi
}

# The scale benchmark's Galera section (apps/bench/src/scale/galera.ts) and the adapter's Galera test: the
# galera-4 provider, rsync for a joining node's state transfer, haproxy in front of the nodes.
ensure_galera_tools() {
  local missing=()
  [ -f /usr/lib/galera/libgalera_smm.so ] || missing+=(galera-4)
  command -v rsync >/dev/null || missing+=(rsync)
  [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
  if [ ${#missing[@]} -eq 0 ]; then
    echo "services: Galera tools already installed"
  else
    apt_install "${missing[@]}"
    echo "services: installed ${missing[*]}"
  fi
}

ensure_chromium() {
  if [ -x /usr/bin/chromium ]; then
    echo "services: Chromium already installed"
  else
    apt_install chromium
    echo "services: Chromium installed"
  fi
}

ensure_arping() {
  if command -v arping >/dev/null; then
    echo "services: arping already installed"
  else
    apt_install iputils-arping
    echo "services: arping installed"
  fi
}

ensure_pgbouncer() {
  if [ -x /usr/sbin/pgbouncer ]; then
    echo "services: PgBouncer already installed"
  else
    apt_install pgbouncer
    echo "services: PgBouncer installed"
  fi
}

# The broker path (statusq relay, work --from): RabbitMQ and NATS with JetStream, as the machine runs them. The
# broker packages' restart tests start private instances of their own from the same binaries.
rabbitmq_answers() { timeout 5 bash -c '</dev/tcp/127.0.0.1/5672' && rabbitmq-diagnostics -q check_running; }

start_rabbitmq() {
  if [ -x /usr/sbin/rabbitmq-server ] && rabbitmq_answers >/dev/null 2>&1; then
    echo "services: RabbitMQ already running"
    return 0
  fi
  [ -x /usr/sbin/rabbitmq-server ] || apt_install rabbitmq-server
  rabbitmq-server -detached >/dev/null 2>&1 || true
  wait_for RabbitMQ 90 rabbitmq_answers
  echo "services: RabbitMQ started"
}

nats_answers() { timeout 5 bash -c '</dev/tcp/127.0.0.1/4222'; }

start_nats() {
  if [ -x /usr/sbin/nats-server ] && nats_answers >/dev/null 2>&1; then
    echo "services: NATS already running"
    return 0
  fi
  [ -x /usr/sbin/nats-server ] || apt_install nats-server
  mkdir -p /var/lib/nats-server
  # By pid file: private nats-server processes of the tests must not pass for this one.
  start-stop-daemon --start --oknodo --background --make-pidfile --pidfile /run/nats-server.pid --exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server -l /var/log/nats-server.log
  wait_for NATS 30 nats_answers
  echo "services: NATS started"
}

start_postgres
start_mariadb
start_rabbitmq
start_nats
ensure_iproute
ensure_galera_tools
ensure_chromium
ensure_arping
ensure_pgbouncer
