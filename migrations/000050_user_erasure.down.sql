SET lock_timeout = '5s';

DROP FUNCTION erase_user_data(text, text, text[], boolean);
DROP FUNCTION erasure_redact_bytes(bytea, text, text, text[], boolean);
DROP FUNCTION erasure_text(bytea);
DROP FUNCTION erasure_redact_text(text, text, text, text[]);
DROP FUNCTION erasure_redact(jsonb, text, text);
DROP FUNCTION erasure_needles(jsonb);
DROP FUNCTION erasure_personal_key(text);
DROP FUNCTION erasure_patterns(text[]);
DROP FUNCTION erasure_mentions(text, text, text[]);
DROP FUNCTION erasure_scrub_jsonb(jsonb, text, text, text[]);
DROP FUNCTION erasure_scrub(text, text, text, text[]);
DROP FUNCTION erasure_literal(text);
DROP TABLE erasures;
DELETE FROM approvals WHERE kind = 'user_erasure';
ALTER TABLE approvals DROP CONSTRAINT approvals_kind_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_check CHECK (kind IN ('payout_resolution', 'bulk_replay'));
