-- dlq-admin writes transaction_outbox rows for two reasons: replaying a dead
-- letter and sending an operator's payout resolution. On the topic of money
-- events (aegis.webhook.pending: credits, refunds, disputes, payout
-- outcomes) only the first is legitimate, so its role may write a row there
-- only as the replay of an open dead letter of that topic, unchanged: the
-- row's replay_of header names the letter, and its payload, partition key
-- and event proof header are the letter's. Anything else is refused with
-- 42501, as a missing grant would be. (The worker also refuses a money event
-- without webhook-api's proof; this keeps the role from writing one at all.)
--
-- The trigger fires only for the topic and for roles other than the two
-- that write money events there (webhook-api, payout-worker's delayed
-- re-publish), so the hot path of ingest never runs it. A superuser (the
-- migrator, tests) is not held to it; any other role that is, or inherits,
-- aegis_dlq_admin is.
CREATE FUNCTION transaction_outbox_money_guard() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    letter dead_letters%ROWTYPE;
BEGIN
    IF NOT pg_has_role(current_user, 'aegis_dlq_admin', 'USAGE')
       OR (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RETURN NEW;
    END IF;
    IF NEW.headers->>'replay_of' ~ '^[0-9]{1,18}$' THEN
        SELECT * INTO letter FROM dead_letters WHERE id = (NEW.headers->>'replay_of')::bigint;
    END IF;
    IF letter.id IS NULL
       OR letter.status <> 'open'
       OR letter.original_topic <> NEW.topic
       OR letter.partition_key <> NEW.partition_key
       OR (letter.headers->>'aegis-event-proof') IS DISTINCT FROM (NEW.headers->>'aegis-event-proof')
       OR convert_from(letter.payload, 'UTF8')::jsonb <> NEW.payload THEN
        RAISE EXCEPTION 'role % may write to % only the replay of an open dead letter of it, unchanged', current_user, NEW.topic
            USING ERRCODE = 'insufficient_privilege';
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER transaction_outbox_money_guard
    BEFORE INSERT ON transaction_outbox
    FOR EACH ROW
    WHEN (NEW.topic = 'aegis.webhook.pending' AND current_user NOT IN ('aegis_webhook_api', 'aegis_payout_worker'))
    EXECUTE FUNCTION transaction_outbox_money_guard();
