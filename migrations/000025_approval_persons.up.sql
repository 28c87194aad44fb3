-- Four-eyes compares people, not tokens: a person may hold several
-- dlq-admin tokens (DLQ_ADMIN_TOKEN_PERSONS). Each approval records the
-- requester's person when it is asked for and the approver's when it is
-- decided, normalised (NFKC, case folded, spaces collapsed), and the table
-- refuses an approval by the requester's own person, as
-- approvals_second_person refuses one by the same token. Rows from before
-- have no persons; dlq-admin then derives them from the token names.
ALTER TABLE approvals
    ADD COLUMN requested_person text,
    ADD COLUMN decided_person   text,
    ADD CONSTRAINT approvals_second_person_by_person CHECK (
        status <> 'approved' OR requested_person IS NULL OR decided_person IS NULL
        OR decided_person <> requested_person);
