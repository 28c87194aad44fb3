REVOKE SELECT ON payment_returns FROM aegis_dlq_admin;
