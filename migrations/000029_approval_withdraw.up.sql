-- The requester may withdraw (reject) their own pending request; only an
-- approval needs a second person. approvals_second_person refused every
-- decision by the requester's token, a withdrawal included, so the API's
-- documented withdraw failed on the constraint.
ALTER TABLE approvals
    DROP CONSTRAINT approvals_second_person,
    ADD CONSTRAINT approvals_second_person CHECK (
        status <> 'approved' OR decided_by IS NULL OR decided_by <> requested_by);
