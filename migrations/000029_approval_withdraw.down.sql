-- NOT VALID: a withdrawal made since (decided by its requester) would fail
-- the older rule; it holds for new decisions.
ALTER TABLE approvals
    DROP CONSTRAINT approvals_second_person,
    ADD CONSTRAINT approvals_second_person CHECK (decided_by IS NULL OR decided_by <> requested_by) NOT VALID;
