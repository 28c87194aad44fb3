DROP INDEX CONCURRENTLY IF EXISTS transaction_outbox_claim_idx;
