#!/usr/bin/env bash
# Makes sure what Aegis needs on localhost is up: PostgreSQL on 127.0.0.1:5432
# that the current user can reach without a password, and Redis on
# 127.0.0.1:6379. Starts them if installed and stopped; installs them from
# Debian/Ubuntu packages when missing (needs root or sudo); otherwise says
# exactly what to do. `make dev` and `make test` run it first.
#
#   scripts/devdeps.sh            Postgres and Redis
#   scripts/devdeps.sh compose    also docker-compose (to validate docker-compose.yml)
#   scripts/devdeps.sh browser    also Debian's chromium (dlq-admin's headless-browser test)
#   scripts/devdeps.sh promtool   also promtool and amtool (Debian's prometheus and prometheus-alertmanager
#                                 packages) for the alert rules' and Alertmanager config's checks
#   scripts/devdeps.sh compose browser promtool   all of them
set -euo pipefail

PGHOST=127.0.0.1
PGPORT=5432
REDIS_PORT=6379

say() { printf 'devdeps: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then SUDO="sudo -n"; fi
fi
can_install() { command -v apt-get >/dev/null 2>&1 && { [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ]; }; }

APT_UPDATED=0
apt_install() {
  if [ "$APT_UPDATED" -eq 0 ]; then
    say "apt-get update"
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    APT_UPDATED=1
  fi
  say "installing $* from the system packages"
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

pg_up() { pg_isready -q -h "$PGHOST" -p "$PGPORT" 2>/dev/null; }

ensure_postgres() {
  if command -v pg_isready >/dev/null 2>&1 && pg_up; then
    return 0
  fi
  if ! command -v pg_ctlcluster >/dev/null 2>&1; then
    if can_install; then
      apt_install postgresql postgresql-client
    else
      die "PostgreSQL is not installed. Install it (Debian/Ubuntu: sudo apt-get install postgresql) or point DATABASE_URL at a server and TEST_DATABASE_URL at one where you may create databases."
    fi
  fi
  local version
  version=$(ls /etc/postgresql 2>/dev/null | sort -V | tail -1)
  [ -n "$version" ] || die "PostgreSQL is installed but has no cluster under /etc/postgresql; create one with: sudo pg_createcluster <version> main"
  if ! pg_up; then
    say "starting PostgreSQL $version"
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main start || true
  fi
  for _ in $(seq 1 50); do pg_up && break; sleep 0.2; done
  pg_up || die "PostgreSQL did not start; see /var/log/postgresql/postgresql-$version-main.log"
  ensure_pg_access "$version"
}

# The services connect as the current user without a password (docs/design/contract.md's
# default DATABASE_URL has no credentials). On a machine where this script
# installed Postgres, make that true: a superuser role for the user, and
# trust for loopback TCP. It never touches a server it can already use.
ensure_pg_access() {
  local version=$1 user
  user=$(id -un)
  if psql -h "$PGHOST" -p "$PGPORT" -d postgres -Atqc 'select 1' >/dev/null 2>&1; then
    return 0
  fi
  [ "$(id -u)" -eq 0 ] || [ -n "$SUDO" ] || die "Postgres runs but refuses user '$user' on $PGHOST:$PGPORT. Create a role and allow it, or set DATABASE_URL and TEST_DATABASE_URL with credentials."
  say "granting local development access to role '$user' (trust on loopback)"
  local hba="/etc/postgresql/$version/main/pg_hba.conf"
  if ! grep -q '# aegis-dev' "$hba"; then
    $SUDO sh -c "printf '%s\n' 'host all all 127.0.0.1/32 trust # aegis-dev' 'host all all ::1/128 trust # aegis-dev' | cat - '$hba' > '$hba.aegis' && mv '$hba.aegis' '$hba' && chown postgres:postgres '$hba'"
    $SUDO pg_ctlcluster --skip-systemctl-redirect "$version" main reload
  fi
  $SUDO su postgres -c "psql -Atqc \"select 1 from pg_roles where rolname = '$user'\" | grep -q 1 || createuser -s '$user'"
  psql -h "$PGHOST" -p "$PGPORT" -d postgres -Atqc 'select 1' >/dev/null || die "could not give '$user' access to Postgres"
}

redis_up() {
  if command -v redis-cli >/dev/null 2>&1; then
    [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null)" = "PONG" ]
  else
    exec 3<>"/dev/tcp/127.0.0.1/$REDIS_PORT" 2>/dev/null || return 1
    printf 'PING\r\n' >&3
    local reply
    read -r -t 2 reply <&3 || true
    exec 3<&- 3>&-
    [ "${reply%$'\r'}" = "+PONG" ]
  fi
}

ensure_redis() {
  redis_up && return 0
  if ! command -v redis-server >/dev/null 2>&1; then
    if can_install; then
      apt_install redis-server
    else
      die "Redis is not installed. Install it (Debian/Ubuntu: sudo apt-get install redis-server) or run one on 127.0.0.1:$REDIS_PORT."
    fi
  fi
  say "starting Redis on 127.0.0.1:$REDIS_PORT"
  local dir=/var/lib/redis log=/var/log/redis/aegis.log
  if [ ! -w /var/lib/redis ] 2>/dev/null; then dir=$(mktemp -d); log="$dir/redis.log"; fi
  mkdir -p "$(dirname "$log")" 2>/dev/null || true
  redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no \
    --dir "$dir" --logfile "$log" >/dev/null
  for _ in $(seq 1 50); do redis_up && break; sleep 0.1; done
  redis_up || die "Redis did not start; see $log"
}

ensure_compose() {
  command -v docker-compose >/dev/null 2>&1 && return 0
  if can_install; then
    apt_install docker-compose || say "docker-compose could not be installed; docker-compose.yml will not be validated"
  else
    say "docker-compose is not installed; docker-compose.yml will not be validated"
  fi
}

# dlq-admin's page is tested in a real headless browser (chromedp drives
# /usr/bin/chromium); the test fails with a pointer here when it is missing.
ensure_chromium() {
  command -v chromium >/dev/null 2>&1 && return 0
  if can_install; then
    apt_install chromium || die "chromium could not be installed; dlq-admin's browser test needs it (sudo apt-get install chromium)"
  else
    die "chromium is not installed; dlq-admin's browser test needs it: sudo apt-get install chromium"
  fi
}

# The alert rules and the observability profile's Prometheus config are
# checked with promtool (make rules-check), which Debian ships in prometheus.
ensure_promtool() {
  command -v promtool >/dev/null 2>&1 && return 0
  if can_install; then
    apt_install prometheus || die "prometheus could not be installed; make rules-check needs its promtool (sudo apt-get install prometheus)"
  else
    die "promtool is not installed; make rules-check needs it: sudo apt-get install prometheus"
  fi
}

# The Alertmanager config is checked with amtool (make rules-check), which
# Debian ships in prometheus-alertmanager.
ensure_amtool() {
  command -v amtool >/dev/null 2>&1 && return 0
  if can_install; then
    apt_install prometheus-alertmanager || die "prometheus-alertmanager could not be installed; make rules-check needs its amtool (sudo apt-get install prometheus-alertmanager)"
  else
    die "amtool is not installed; make rules-check needs it: sudo apt-get install prometheus-alertmanager"
  fi
}

ensure_postgres
ensure_redis
say "PostgreSQL on $PGHOST:$PGPORT and Redis on 127.0.0.1:$REDIS_PORT are up"
for extra in "$@"; do
  case "$extra" in
    compose) ensure_compose ;;
    browser) ensure_chromium ;;
    promtool) ensure_promtool; ensure_amtool ;;
    *) die "unknown argument '$extra': want compose, browser and/or promtool" ;;
  esac
done
