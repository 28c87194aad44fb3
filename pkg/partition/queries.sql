-- The statements of partition maintenance, compiled by sqlc into ./sqlcdb.
-- Both run SECURITY DEFINER functions of migrations 000044 and 000051: the services'
-- roles have DML only, and the functions touch only the tables listed in
-- partition_policies.

-- name: Maintain :one
-- Creates the table's partitions ahead, drops those past its retention and
-- trims its dedupe keys (maintain_partitions refuses a table with no
-- policy).
SELECT m.created::int AS created, m.dropped::int AS dropped, m.skipped::int AS skipped,
       m.keys_trimmed::int AS keys_trimmed, m.time_scale::int AS time_scale
FROM maintain_partitions(@table_name::text) m;

-- name: Status :many
-- Each policy table's partitions: how far ahead they reach, how long the
-- oldest has been past the retention, the policy's time scale.
SELECT s.table_name::text AS table_name, s.ahead_seconds::float8 AS ahead_seconds,
       s.overdue_seconds::float8 AS overdue_seconds, s.retention_seconds::float8 AS retention_seconds,
       s.partitions::int AS partitions, s.time_scale::int AS time_scale
FROM partition_status() s;

-- name: Rescale :one
-- Sets the table's time scale, its partitions made again at the new width
-- (rescale_partitions: owner only, an empty table only).
SELECT rescale_partitions(@table_name::text, @time_scale::int)::int AS created;
