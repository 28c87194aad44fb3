ALTER TABLE approvals
    DROP CONSTRAINT approvals_second_person_by_person,
    DROP COLUMN decided_person,
    DROP COLUMN requested_person;
