#!/usr/bin/env bash
# Measures partition upkeep two ways on one scratch database, side by side:
# maintain_partitions (the keeper's function, migrations 000044/000051) and
# pg_partman's run_maintenance (Debian's postgresql-15-partman, installed here
# if missing). docs/design/data-lifecycle.md, "Why not pg_partman", holds the
# figures and what they decided.
#
# Two tables of the same shape as webhook_events, each with daily partitions
# from 100 days ago to 14 days ahead and ROWS rows in each of the ten days
# past a 90-day retention; then, for each:
#   1. a maintenance run that drops the ten expired partitions (its time);
#   2. a maintenance run with nothing to do (its time);
#   3. inserts at a steady pace into today's partition while a 5-s read of
#      the table (a report, the PSP reconciliation's scan) holds its lock,
#      and a maintenance run with one expired partition to drop starts
#      during the read: the longest insert, and what the maintenance did.
#
#   scripts/partition-upkeep.sh [ROWS]      (default 50000)
#
# Needs bin/webhook-api (make build) and the local Postgres (devdeps.sh).
set -euo pipefail
ROWS=${1:-50000}
DB=aegis_partition_upkeep
ADMIN="postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
URL="postgres://postgres@127.0.0.1:5432/$DB?sslmode=disable"
PGBENCH=$(ls /usr/lib/postgresql/*/bin/pgbench | tail -1)
say() { printf 'partition-upkeep: %s\n' "$*" >&2; }
q() { psql -X -q -v ON_ERROR_STOP=1 "$URL" "$@"; }

if [ ! -e /usr/share/postgresql/15/extension/pg_partman.control ]; then
  say "installing postgresql-15-partman"
  DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql-15-partman >/dev/null
fi
psql -X -q "$ADMIN" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
trap 'psql -X -q "$ADMIN" -c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true' EXIT
DATABASE_URL=$URL bin/webhook-api migrate --contract >/dev/null 2>&1

q >/dev/null <<SQL
CREATE SCHEMA partman;
CREATE EXTENSION pg_partman SCHEMA partman;
-- The same columns as webhook_events, for both.
CREATE TABLE upkeep_ours (LIKE webhook_events INCLUDING DEFAULTS INCLUDING IDENTITY) PARTITION BY RANGE (received_at);
ALTER TABLE upkeep_ours ADD PRIMARY KEY (id, received_at);
CREATE INDEX ON upkeep_ours (provider, event_id);
CREATE TABLE upkeep_partman (LIKE upkeep_ours INCLUDING ALL) PARTITION BY RANGE (received_at);
-- Ours: a policy as webhook_events' (90 days, 14 ahead): the keeper makes
-- today's partition and those ahead; the past days are made here as it
-- makes them.
INSERT INTO partition_policies (table_name, column_name, premake_days, retention) VALUES ('upkeep_ours', 'received_at', 14, '90 days');
SELECT * FROM maintain_partitions('upkeep_ours');
DO \$\$
DECLARE d timestamptz;
BEGIN
    FOR d IN SELECT generate_series(date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '100 days',
                                    date_trunc('day', now() AT TIME ZONE 'UTC') AT TIME ZONE 'UTC' - interval '1 day', interval '1 day') LOOP
        EXECUTE format('CREATE TABLE %I (LIKE upkeep_ours INCLUDING DEFAULTS INCLUDING CONSTRAINTS)', 'upkeep_ours_p' || to_char(d AT TIME ZONE 'UTC', 'YYYYMMDD'));
        EXECUTE format('ALTER TABLE upkeep_ours ATTACH PARTITION %I FOR VALUES FROM (%L) TO (%L)', 'upkeep_ours_p' || to_char(d AT TIME ZONE 'UTC', 'YYYYMMDD'), d, d + interval '1 day');
    END LOOP;
END
\$\$;
-- pg_partman: daily native partitions from 100 days ago, 14 ahead, the same retention.
SELECT partman.create_parent('public.upkeep_partman', 'received_at', 'native', 'daily', p_premake := 14,
    p_start_partition := to_char(now() - interval '100 days', 'YYYY-MM-DD'));
UPDATE partman.part_config SET retention = '90 days', retention_keep_table = false, infinite_time_partitions = true
WHERE parent_table = 'public.upkeep_partman';
SQL
say "$(q -Atc "SELECT 'pg_partman ' || extversion || ' on PostgreSQL ' || current_setting('server_version') FROM pg_extension WHERE extname = 'pg_partman'")"
say "filling: $ROWS rows in each of the ten expired days of each table"
for t in upkeep_ours upkeep_partman; do
  q -c "INSERT INTO $t (provider, event_id, event_type, payload, correlation_id, received_at)
        SELECT 'stripe', 'evt_' || d || '_' || i, 'charge.succeeded', jsonb_build_object('pad', repeat('x', 400)), 'c',
               date_trunc('day', now()) - make_interval(days => d) + make_interval(secs => i % 86000)
        FROM generate_series(91, 100) d, generate_series(1, $ROWS) i"
done
q -c "VACUUM ANALYZE upkeep_ours" -c "VACUUM ANALYZE upkeep_partman"
parts() { q -Atc "SELECT count(*) FROM pg_inherits WHERE inhparent = '$1'::regclass"; }
ms() { # SQL: the statement's time in the server's session (psql's \timing), without connecting
  q -At -c '\timing on' -c "$1" | sed -n 's/^Time: \([0-9.]*\) ms.*/\1/p' | tail -1
}
timed() { printf '| %s | %s ms |\n' "$1" "$(ms "$2")"; }
echo "| step | time |"
echo "|---|---|"
echo "| partitions before: ours / pg_partman | $(parts upkeep_ours) / $(parts upkeep_partman) |"
timed "ours: drop the ten expired days" "SELECT * FROM maintain_partitions('upkeep_ours')"
timed "pg_partman: drop the ten expired days" "SELECT partman.run_maintenance('public.upkeep_partman', p_analyze := false)"
echo "| partitions after: ours / pg_partman | $(parts upkeep_ours) / $(parts upkeep_partman) |"
timed "ours: nothing to do" "SELECT * FROM maintain_partitions('upkeep_ours')"
timed "pg_partman: nothing to do" "SELECT partman.run_maintenance('public.upkeep_partman', p_analyze := false)"

# One more expired day for each, then the read, the maintenance and the inserts.
# Each named as its keeper names its partitions (pg_partman orders them by name).
old=$(date -u -d '95 days ago' +%Y-%m-%d)
declare -A oldpart=([ours]="upkeep_ours_p$(date -u -d '95 days ago' +%Y%m%d)" [partman]="upkeep_partman_p$(date -u -d '95 days ago' +%Y_%m_%d)")
q >/dev/null <<SQL
CREATE TABLE ${oldpart[ours]} (LIKE upkeep_ours INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE upkeep_ours ATTACH PARTITION ${oldpart[ours]} FOR VALUES FROM ('$old') TO ('$old'::date + 1);
CREATE TABLE ${oldpart[partman]} (LIKE upkeep_partman INCLUDING DEFAULTS INCLUDING CONSTRAINTS);
ALTER TABLE upkeep_partman ATTACH PARTITION ${oldpart[partman]} FOR VALUES FROM ('$old') TO ('$old'::date + 1);
SQL
script=$(mktemp)
for pair in "ours:SELECT * FROM maintain_partitions('upkeep_ours')" "partman:SELECT partman.run_maintenance('public.upkeep_partman', p_analyze := false)"; do
  name=${pair%%:*}; maint=${pair#*:}; t=upkeep_$name
  printf "INSERT INTO %s (provider, event_id, event_type, payload, correlation_id) VALUES ('stripe', 'evt_live_' || random(), 'charge.succeeded', '{}', 'c');\n" "$t" >"$script"
  logdir=$(mktemp -d)
  (cd "$logdir" && "$PGBENCH" -n -c 4 -R 200 -T 10 -l -f "$script" "$URL" >/dev/null 2>&1) &
  bench=$!
  sleep 2
  q -c "BEGIN; SELECT count(*) FROM $t; SELECT pg_sleep(5); COMMIT;" >/dev/null &
  reader=$!
  sleep 0.5
  took=$(ms "$maint")
  wait $reader $bench || true
  max=$(cat "$logdir"/pgbench_log.* | awk '{ if ($3 > m) m = $3 } END { printf "%.0f", m / 1000 }')
  left=$(q -Atc "SELECT count(*) FROM pg_class WHERE relname = '${oldpart[$name]}'")
  printf '| %s: a 5-s read holds the table; maintenance starts 0.5 s in | maintenance %s ms; expired partition dropped: %s; longest insert %s ms |\n' \
    "$name" "$took" "$([ "$left" = 1 ] && echo "no (skipped: its lock was not free within 200 ms)" || echo yes)" "$max"
  rm -rf "$logdir"
done
rm -f "$script"
