DROP TRIGGER IF EXISTS payouts_status_since ON payouts;
DROP FUNCTION IF EXISTS payouts_status_since();
ALTER TABLE payouts DROP COLUMN IF EXISTS deadline_resumed_at, DROP COLUMN IF EXISTS deadline_resumes, DROP COLUMN IF EXISTS status_since;
