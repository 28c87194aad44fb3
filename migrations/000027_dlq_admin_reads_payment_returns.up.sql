-- dlq-admin's integrity check holds the disputes account to the open
-- disputes and the receivables to what each user owes, both of which are
-- recorded in payment_returns (docs/reference/accounting.md): it reads the table.
GRANT SELECT ON payment_returns TO aegis_dlq_admin;
