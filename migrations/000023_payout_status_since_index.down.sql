DROP INDEX CONCURRENTLY IF EXISTS payouts_status_since_idx;
