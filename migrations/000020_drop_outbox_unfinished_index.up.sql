-- transaction_outbox_claim_idx (000019) replaces this index. A relay of the
-- previous release still running during the rollout no longer walks an
-- index for its claim: it reads the unfinished rows through
-- transaction_outbox_unfinished_key_idx and sorts them (slower on a large
-- backlog, still correct) until it is replaced.
DROP INDEX CONCURRENTLY IF EXISTS transaction_outbox_unfinished_idx;
