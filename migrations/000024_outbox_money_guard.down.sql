DROP TRIGGER IF EXISTS transaction_outbox_money_guard ON transaction_outbox;
DROP FUNCTION IF EXISTS transaction_outbox_money_guard();
