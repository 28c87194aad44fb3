-- Personal-data erasure of one user (dlq-admin: aegisctl users erase,
-- four-eyes through approvals). docs/data.md, "Personal data", says what it
-- does per column; docs/operations/erasure.md how to run it.
--
-- dlq-admin records the request (erasures, approvals, audit_log: its own
-- tables). The erasure itself rewrites tables every service writes, so it is
-- one SECURITY DEFINER function owned by the schema owner, run in the
-- transaction that records the approval: it refuses while money is held or a
-- payout, outbox row or dead letter of the user is unfinished (money is never
-- stranded by an erasure), then replaces the user id by a pseudonym in every
-- id column, redacts personal keys of the raw PSP bodies (webhook_events,
-- transaction_outbox, dead_letters), destinations and settlement bodies, and
-- scrubs free text that quotes the user id or the person's name, email,
-- phone, address or card fingerprint. The ledger (ledger_transactions,
-- ledger_entries) is not touched: its rows name wallets by id, and a wallet
-- keeps its id and balance under the pseudonym.

SET lock_timeout = '5s';

-- One row per erasure request. user_id is held only while the request waits
-- for its second operator; it is cleared when the request is decided, so an
-- erased user is recorded only as the pseudonym (a keyed digest of the user
-- id: dlq-admin's ERASURE_KEY), which is what recognises the same user later.
CREATE TABLE erasures (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    pseudonym    text NOT NULL CHECK (pseudonym ~ '^erased:[0-9a-f]{32}(\.[0-9]+)?$'),
    user_id      text CHECK (user_id <> ''),
    status       text NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'erased', 'rejected')),
    reason       text NOT NULL CHECK (reason <> ''),
    requested_by text NOT NULL,
    approval_id  bigint REFERENCES approvals (id),
    approved_by  text,
    counts       jsonb,
    requested_at timestamptz NOT NULL,
    decided_at   timestamptz,
    CONSTRAINT erasures_user_only_while_pending CHECK ((status = 'pending') = (user_id IS NOT NULL)),
    CONSTRAINT erasures_erased_approved CHECK (status <> 'erased' OR (approved_by IS NOT NULL AND counts IS NOT NULL))
);
CREATE UNIQUE INDEX erasures_one_pending ON erasures (pseudonym) WHERE status = 'pending';
CREATE INDEX erasures_pseudonym ON erasures (pseudonym, id);

ALTER TABLE approvals DROP CONSTRAINT approvals_kind_check;
ALTER TABLE approvals ADD CONSTRAINT approvals_kind_check
    CHECK (kind IN ('payout_resolution', 'bulk_replay', 'user_erasure'));

-- s as a regular expression that matches it literally.
CREATE FUNCTION erasure_literal(s text) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = public, pg_temp
AS $$ SELECT regexp_replace(s, '([][(){}.*+?^$|\\-])', '\\\1', 'g') $$;

-- t with the user id (as a whole token: not inside a longer id) replaced by
-- the pseudonym and every needle (the person's name, email, phone, ...)
-- by [erased], case-insensitively.
CREATE FUNCTION erasure_scrub(t text, p_user text, p_pseudonym text, p_needles text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
DECLARE
    n text;
BEGIN
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    t := regexp_replace(t, '(?<![A-Za-z0-9_-])' || erasure_literal(p_user) || '(?![A-Za-z0-9_-])', p_pseudonym, 'g');
    FOREACH n IN ARRAY coalesce(p_needles, '{}') LOOP
        t := regexp_replace(t, erasure_literal(n), '[erased]', 'gi');
    END LOOP;
    RETURN t;
END
$$;

-- doc with erasure_scrub applied to every string and key in it: the
-- document stays valid JSON whatever a needle matches.
CREATE FUNCTION erasure_scrub_jsonb(doc jsonb, p_user text, p_pseudonym text, p_needles text[]) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
DECLARE
    out jsonb;
    k text;
    v jsonb;
BEGIN
    CASE jsonb_typeof(doc)
    WHEN 'object' THEN
        out := '{}'::jsonb;
        FOR k, v IN SELECT key, value FROM jsonb_each(doc) LOOP
            out := out || jsonb_build_object(erasure_scrub(k, p_user, p_pseudonym, p_needles),
                erasure_scrub_jsonb(v, p_user, p_pseudonym, p_needles));
        END LOOP;
        RETURN out;
    WHEN 'array' THEN
        SELECT coalesce(jsonb_agg(erasure_scrub_jsonb(e, p_user, p_pseudonym, p_needles) ORDER BY n), '[]'::jsonb) INTO out
        FROM jsonb_array_elements(doc) WITH ORDINALITY a(e, n);
        RETURN out;
    WHEN 'string' THEN
        RETURN to_jsonb(erasure_scrub(doc #>> '{}', p_user, p_pseudonym, p_needles));
    ELSE
        RETURN doc;
    END CASE;
END
$$;

-- Whether t quotes the user id (as a whole token) or a needle: what
-- erasure_scrub would change. p_patterns are the needles as
-- case-insensitive LIKE patterns (erasure_patterns): one LIKE ANY per row
-- is what keeps the scan of a large table cheap.
CREATE FUNCTION erasure_mentions(t text, p_user text, p_patterns text[]) RETURNS boolean
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
    SELECT t IS NOT NULL AND ((strpos(t, p_user) > 0
            AND t ~ ('(?<![A-Za-z0-9_-])' || erasure_literal(p_user) || '(?![A-Za-z0-9_-])'))
        OR lower(t) LIKE ANY (p_patterns))
$$;

-- The needles as lower-case LIKE patterns that match them anywhere.
CREATE FUNCTION erasure_patterns(p_needles text[]) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
    SELECT coalesce(array_agg('%' || replace(replace(replace(lower(n), '\', '\\'), '%', '\%'), '_', '\_') || '%'), '{}')
    FROM unnest(p_needles) n
$$;

-- The keys of a PSP body (Stripe, Paystack, at any depth) whose value is
-- about the person: replaced whole. Amounts, currencies, statuses, types,
-- dates and the PSP's object ids stay: the ledger and the PSP reconciliation
-- need them.
CREATE FUNCTION erasure_personal_key(k text) RETURNS boolean
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
    SELECT lower(k) IN ('name', 'first_name', 'last_name', 'email', 'phone', 'address', 'billing_details', 'shipping',
        'customer_details', 'customer_email', 'customer_name', 'customer_phone', 'receipt_email', 'card',
        'payment_method_details', 'authorization', 'fingerprint', 'last4', 'bin', 'exp_month', 'exp_year',
        'ip_address', 'account_name', 'account_number', 'account_holder_name', 'description', 'phone_number',
        'international_format_phone', 'individual', 'representative', 'dob', 'ssn_last_4', 'id_number',
        'receipt_number', 'source', 'log', 'billing', 'owner', 'details', 'bank_account', 'cardholder', 'holder_name',
        'support_address', 'support_email', 'support_phone', 'display_name', 'nickname', 'mobile', 'ip')
$$;

-- The person's values under the identifying keys of a PSP body: what
-- erasure_scrub looks for in free text elsewhere.
CREATE FUNCTION erasure_needles(doc jsonb) RETURNS text[]
LANGUAGE sql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
    WITH RECURSIVE walk(k, v) AS (
        SELECT NULL::text, doc
        UNION ALL
        SELECT e.k, e.v FROM walk w,
            LATERAL (SELECT o.key, o.value FROM jsonb_each(CASE WHEN jsonb_typeof(w.v) = 'object' THEN w.v END) o
                     UNION ALL
                     SELECT w.k, a.value FROM jsonb_array_elements(CASE WHEN jsonb_typeof(w.v) = 'array' THEN w.v END) a) e(k, v)
    )
    SELECT coalesce(array_agg(DISTINCT v #>> '{}'), '{}') FROM walk
    WHERE jsonb_typeof(v) = 'string' AND length(v #>> '{}') >= 5
      AND lower(k) IN ('name', 'first_name', 'last_name', 'email', 'phone', 'line1', 'line2', 'fingerprint',
          'customer_email', 'customer_name', 'customer_phone', 'receipt_email', 'account_name', 'account_number',
          'account_holder_name', 'phone_number', 'international_format_phone', 'cardholder', 'holder_name')
$$;

-- doc with the values of personal keys replaced by "[erased]" (metadata
-- keeps only its user id, pseudonymised, and payout id) and any string equal to the user
-- id replaced by the pseudonym.
CREATE FUNCTION erasure_redact(doc jsonb, p_user text, p_pseudonym text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
DECLARE
    out jsonb;
    k text;
    v jsonb;
BEGIN
    CASE jsonb_typeof(doc)
    WHEN 'object' THEN
        out := '{}'::jsonb;
        FOR k, v IN SELECT key, value FROM jsonb_each(doc) LOOP
            IF lower(k) = 'metadata' AND jsonb_typeof(v) = 'object' THEN
                -- Only the ids the suite itself put there stay.
                out := out || jsonb_build_object(k, jsonb_strip_nulls(jsonb_build_object(
                    'user_id', erasure_redact(v->'user_id', p_user, p_pseudonym), 'payout_id', v->'payout_id')));
            ELSIF erasure_personal_key(k) AND jsonb_typeof(v) <> 'null'
                  AND NOT (lower(k) = 'source' AND jsonb_typeof(v) = 'string' AND v #>> '{}' !~ '@') THEN
                out := out || jsonb_build_object(k, '[erased]');
            ELSE
                out := out || jsonb_build_object(k, erasure_redact(v, p_user, p_pseudonym));
            END IF;
        END LOOP;
        RETURN out;
    WHEN 'array' THEN
        SELECT coalesce(jsonb_agg(erasure_redact(e, p_user, p_pseudonym) ORDER BY n), '[]'::jsonb) INTO out
        FROM jsonb_array_elements(doc) WITH ORDINALITY a(e, n);
        RETURN out;
    WHEN 'string' THEN
        IF doc #>> '{}' = p_user THEN
            RETURN to_jsonb(p_pseudonym);
        END IF;
        RETURN doc;
    ELSE
        RETURN doc;
    END CASE;
END
$$;

-- A JSON document redacted and scrubbed; text that is not JSON scrubbed.
CREATE FUNCTION erasure_redact_text(t text, p_user text, p_pseudonym text, p_needles text[]) RETURNS text
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
BEGIN
    IF t IS NULL THEN
        RETURN NULL;
    END IF;
    BEGIN
        RETURN erasure_scrub_jsonb(erasure_redact(t::jsonb, p_user, p_pseudonym), p_user, p_pseudonym, p_needles)::text;
    EXCEPTION WHEN invalid_text_representation THEN
        RETURN erasure_scrub(t, p_user, p_pseudonym, p_needles);
    END;
END
$$;

-- b as text, or NULL when it is not UTF-8.
CREATE FUNCTION erasure_text(b bytea) RETURNS text
LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
BEGIN
    RETURN convert_from(b, 'UTF8');
EXCEPTION WHEN character_not_in_repertoire OR untranslatable_character THEN
    RETURN NULL;
END
$$;

-- Bytes as erasure_redact_text (p_redact) or erasure_scrub; bytes that are
-- not UTF-8 unchanged.
CREATE FUNCTION erasure_redact_bytes(b bytea, p_user text, p_pseudonym text, p_needles text[], p_redact boolean) RETURNS bytea
LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
SET search_path = public, pg_temp
AS $$
DECLARE
    t text := erasure_text(b);
BEGIN
    IF t IS NULL THEN
        RETURN b;
    END IF;
    IF p_redact THEN
        RETURN convert_to(erasure_redact_text(t, p_user, p_pseudonym, p_needles), 'UTF8');
    END IF;
    RETURN convert_to(erasure_scrub(t, p_user, p_pseudonym, p_needles), 'UTF8');
END
$$;

-- erase_user_data erases user p_user's personal data, replacing the user id
-- by p_pseudonym, in the caller's transaction; with p_check_only it changes
-- nothing and answers what it would change. p_closed are the payout states
-- after which nothing more happens to a payout's money (pkg/payoutstate's
-- Closed). It raises, changing nothing:
--   AEG01 the user is unknown (no wallet, payout, destination, PSP event or
--         settlement message names it);
--   AEG02 a wallet of the user holds money or is owed money;
--   AEG03 a payout of the user is not closed;
--   AEG04 an outbox row of the user (or quoting them) is unpublished, or a
--         dead letter of the user (or quoting them) is open: money on its
--         way, or a message a replay must publish unchanged.
-- The answer counts the rows it changed per table.
CREATE FUNCTION erase_user_data(p_user text, p_pseudonym text, p_closed text[], p_check_only boolean)
RETURNS jsonb
LANGUAGE plpgsql
SECURITY DEFINER
SET search_path = public, pg_temp
AS $$
DECLARE
    counts jsonb := '{}'::jsonb;
    needles text[];
    patterns text[];
    known boolean;
    n bigint;
    payout_ids uuid[];
    message_ids bigint[];
BEGIN
    IF coalesce(p_user, '') = '' OR p_pseudonym !~ '^erased:[0-9a-f]{32}(\.[0-9]+)?$' THEN
        RAISE EXCEPTION 'erase_user_data: a user id and a pseudonym erased:<32 hex> are required' USING ERRCODE = 'invalid_parameter_value';
    END IF;

    -- The user's wallets are locked first: the worker posts under the same
    -- row locks, so no credit or hold can land between the check and the
    -- rename.
    PERFORM 1 FROM wallets WHERE kind = 'user' AND owner = p_user ORDER BY id FOR UPDATE;
    known := EXISTS (SELECT 1 FROM wallets WHERE kind = 'user' AND owner = p_user)
        OR EXISTS (SELECT 1 FROM payouts WHERE user_id = p_user)
        OR EXISTS (SELECT 1 FROM destinations WHERE user_id = p_user)
        OR EXISTS (SELECT 1 FROM outbound_messages WHERE user_id = p_user)
        OR EXISTS (SELECT 1 FROM webhook_events WHERE user_id = p_user);
    IF NOT known THEN
        RAISE EXCEPTION 'no data of this user: unknown user id' USING ERRCODE = 'AEG01';
    END IF;
    IF EXISTS (SELECT 1 FROM wallets WHERE kind = 'user' AND owner = p_user AND (balance <> 0 OR owed <> 0)) THEN
        RAISE EXCEPTION 'erasure refused: a wallet of the user holds or is owed money; pay it out or settle it first'
            USING ERRCODE = 'AEG02';
    END IF;
    IF EXISTS (SELECT 1 FROM payouts WHERE user_id = p_user AND NOT (status = ANY (p_closed))) THEN
        RAISE EXCEPTION 'erasure refused: a payout of the user is not finished' USING ERRCODE = 'AEG03';
    END IF;
    SELECT coalesce(array_agg(id), '{}') INTO payout_ids FROM payouts WHERE user_id = p_user;

    -- What identifies the person in free text: the values under the
    -- identifying keys of the user's PSP bodies.
    SELECT coalesce(array_agg(DISTINCT x), '{}') INTO needles
    FROM (SELECT unnest(erasure_needles(payload)) x FROM webhook_events WHERE user_id = p_user) s;
    patterns := erasure_patterns(needles);

    IF EXISTS (SELECT 1 FROM transaction_outbox WHERE finished_at IS NULL
               AND (partition_key = p_user OR payload->>'user_id' = p_user
                    OR partition_key IN (SELECT 'payout-retry:' || id::text FROM unnest(payout_ids) id)
                    OR erasure_mentions(payload::text, p_user, patterns))) THEN
        RAISE EXCEPTION 'erasure refused: an outbox message of the user is not yet published' USING ERRCODE = 'AEG04';
    END IF;
    -- An open letter must be replayed as it was stored, so one that is the
    -- user's, or quotes them, is closed before the erasure.
    IF EXISTS (SELECT 1 FROM dead_letters WHERE status = 'open'
               AND (partition_key = p_user OR subject->>'user_id' = p_user
                    OR subject->>'payout_id' IN (SELECT id::text FROM unnest(payout_ids) id)
                    OR erasure_mentions(erasure_text(payload), p_user, patterns)
                    OR erasure_mentions(headers::text, p_user, patterns))) THEN
        RAISE EXCEPTION 'erasure refused: an open dead letter is the user''s or quotes them; replay or discard it first' USING ERRCODE = 'AEG04';
    END IF;

    SELECT coalesce(array_agg(id), '{}') INTO message_ids FROM outbound_messages WHERE user_id = p_user;

    IF p_check_only THEN
        RETURN jsonb_build_object(
            'wallets', (SELECT count(*) FROM wallets WHERE kind = 'user' AND owner = p_user),
            'webhook_events', (SELECT count(*) FROM webhook_events WHERE user_id = p_user),
            'payouts', cardinality(payout_ids),
            'destinations', (SELECT count(*) FROM destinations WHERE user_id = p_user),
            'outbound_messages', cardinality(message_ids));
    END IF;

    -- Ids: the pseudonym everywhere the user id is a column. Balances and
    -- sums do not change: wallets keep their ids and ledger entries.
    UPDATE wallets SET owner = p_pseudonym, updated_at = now() WHERE kind = 'user' AND owner = p_user;
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('wallets', n);
    UPDATE credit_availability SET user_id = p_pseudonym WHERE user_id = p_user;
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('credit_availability', n);
    UPDATE payment_returns SET user_id = p_pseudonym, updated_at = now() WHERE user_id = p_user;
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('payment_returns', n);
    UPDATE payout_resolutions SET user_id = p_pseudonym, reason = erasure_scrub(reason, p_user, p_pseudonym, needles)
    WHERE user_id = p_user;
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('payout_resolutions', n);

    -- Payouts keep amounts, states, PSP references and the client's
    -- Idempotency-Key (the client's token: a late retry must still find its
    -- payout); the person's destination identifiers go.
    UPDATE payouts SET user_id = p_pseudonym, destination = '[erased]',
        external_account = CASE WHEN external_account IS NOT NULL THEN '[erased]' END,
        last_error = erasure_scrub(last_error, p_user, p_pseudonym, needles)
    WHERE id = ANY (payout_ids);
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('payouts', n);
    UPDATE payout_transitions SET error = erasure_scrub(error, p_user, p_pseudonym, needles),
        detail = erasure_redact_text(detail::text, p_user, p_pseudonym, needles)::jsonb
    WHERE payout_id = ANY (payout_ids)
      AND (erasure_mentions(error, p_user, patterns) OR erasure_mentions(detail::text, p_user, patterns));
    UPDATE payout_attempts SET error = erasure_scrub(error, p_user, p_pseudonym, needles)
    WHERE payout_id = ANY (payout_ids) AND erasure_mentions(error, p_user, patterns);
    UPDATE payout_evidence SET reason = erasure_scrub(reason, p_user, p_pseudonym, needles)
    WHERE payout_id = ANY (payout_ids) AND erasure_mentions(reason, p_user, patterns);

    -- Destinations are disabled (no payout may go to them again) and lose
    -- the PSP's identifiers of the person's account and its country.
    UPDATE destinations SET user_id = p_pseudonym, destination = '[erased]',
        external_account = CASE WHEN external_account IS NOT NULL THEN '[erased]' END,
        psp_record = CASE WHEN psp_record IS NOT NULL THEN psp_record - 'country' END,
        status = 'disabled', disabled_at = coalesce(disabled_at, now()), disabled_by = coalesce(disabled_by, 'erasure'),
        disabled_reason = CASE WHEN status = 'active' THEN 'personal data erased'
                               ELSE erasure_scrub(disabled_reason, p_user, p_pseudonym, needles) END
    WHERE user_id = p_user;
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('destinations', n);

    -- Raw PSP bodies: the envelope columns (provider, event id, type, object,
    -- amount, currency, time) stay; the body keeps ids and amounts.
    UPDATE webhook_events SET user_id = p_pseudonym,
        payload = erasure_redact_text(payload::text, p_user, p_pseudonym, needles)::jsonb
    WHERE user_id = p_user;
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('webhook_events', n);

    -- Outbox rows still held (published, or settled dlq). Unfinished ones
    -- were refused above; one committed since (a PSP event that arrived
    -- during the erasure) is left as it is, so that it is published and
    -- credited as sent: under the user id, to a new wallet.
    UPDATE transaction_outbox SET
        partition_key = CASE WHEN partition_key = p_user THEN p_pseudonym ELSE partition_key END,
        payload = erasure_redact_text(payload::text, p_user, p_pseudonym, needles)::jsonb,
        headers = erasure_scrub_jsonb(headers, p_user, p_pseudonym, needles),
        last_error = erasure_scrub(last_error, p_user, p_pseudonym, needles),
        retry_history = erasure_scrub_jsonb(retry_history, p_user, p_pseudonym, needles)
    WHERE finished_at IS NOT NULL
      AND (partition_key = p_user OR payload->>'user_id' = p_user
           OR partition_key IN (SELECT 'payout-retry:' || id::text FROM unnest(payout_ids) id)
           OR erasure_mentions(payload::text, p_user, patterns));
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('transaction_outbox', n);

    -- Dead letters (none of the user's was open): the user's are redacted
    -- like the raw bodies; any other that quotes the user is scrubbed.
    -- subject is generated from the payload and follows it. An open letter
    -- keeps its message (payload, key, headers) unchanged: a replay must
    -- publish it as it was, with its event proof.
    UPDATE dead_letters SET
        partition_key = CASE WHEN partition_key = p_user AND status <> 'open' THEN p_pseudonym ELSE partition_key END,
        payload = CASE WHEN status = 'open' THEN payload ELSE erasure_redact_bytes(payload, p_user, p_pseudonym, needles,
            partition_key = p_user OR subject->>'user_id' = p_user OR subject->>'payout_id' IN (SELECT id::text FROM unnest(payout_ids) id)) END,
        headers = CASE WHEN status = 'open' THEN headers ELSE erasure_scrub_jsonb(headers, p_user, p_pseudonym, needles) END,
        error = erasure_scrub(error, p_user, p_pseudonym, needles),
        retry_history = erasure_scrub_jsonb(retry_history, p_user, p_pseudonym, needles),
        resolution_reason = erasure_scrub(resolution_reason, p_user, p_pseudonym, needles)
    WHERE partition_key = p_user OR subject->>'user_id' = p_user
       OR subject->>'payout_id' IN (SELECT id::text FROM unnest(payout_ids) id)
       OR erasure_mentions(erasure_text(payload), p_user, patterns)
       OR erasure_mentions(headers::text, p_user, patterns) OR erasure_mentions(error, p_user, patterns)
       OR erasure_mentions(resolution_reason, p_user, patterns) OR erasure_mentions(retry_history::text, p_user, patterns);
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('dead_letters', n);

    -- Settlement events: the body delivered to the platform's endpoints
    -- carries the pseudonym from now on (a delivery still pending sends it).
    -- A sequence already kept for the pseudonym (an earlier erasure of the
    -- same person) keeps the higher number.
    UPDATE outbound_messages SET user_id = p_pseudonym,
        body = erasure_redact_bytes(body, p_user, p_pseudonym, needles, true)
    WHERE id = ANY (message_ids);
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('outbound_messages', n);
    UPDATE outbound_attempts SET error = erasure_scrub(error, p_user, p_pseudonym, needles),
        response_body = erasure_scrub(response_body, p_user, p_pseudonym, needles)
    WHERE delivery_id IN (SELECT id FROM outbound_deliveries WHERE message_id = ANY (message_ids))
      AND (erasure_mentions(error, p_user, patterns) OR erasure_mentions(response_body, p_user, patterns));
    UPDATE outbound_deliveries SET last_error = erasure_scrub(last_error, p_user, p_pseudonym, needles)
    WHERE message_id = ANY (message_ids) AND erasure_mentions(last_error, p_user, patterns);
    INSERT INTO outbound_user_sequences (user_id, last)
    SELECT p_pseudonym, last FROM outbound_user_sequences WHERE user_id = p_user
    ON CONFLICT (user_id) DO UPDATE SET last = greatest(outbound_user_sequences.last, EXCLUDED.last);
    DELETE FROM outbound_user_sequences WHERE user_id = p_user;

    -- Operators' free text that quotes the user.
    UPDATE audit_log SET reason = erasure_scrub(reason, p_user, p_pseudonym, needles),
        detail = erasure_scrub_jsonb(detail, p_user, p_pseudonym, needles),
        target_id = erasure_scrub(target_id, p_user, p_pseudonym, needles)
    WHERE erasure_mentions(reason, p_user, patterns) OR erasure_mentions(detail::text, p_user, patterns)
       OR erasure_mentions(target_id, p_user, patterns);
    GET DIAGNOSTICS n = ROW_COUNT; counts := counts || jsonb_build_object('audit_log', n);
    UPDATE approvals SET summary = erasure_scrub(summary, p_user, p_pseudonym, needles),
        decision_reason = erasure_scrub(decision_reason, p_user, p_pseudonym, needles),
        request = erasure_scrub_jsonb(request, p_user, p_pseudonym, needles),
        target_id = erasure_scrub(target_id, p_user, p_pseudonym, needles)
    WHERE erasure_mentions(summary, p_user, patterns) OR erasure_mentions(decision_reason, p_user, patterns)
       OR erasure_mentions(request::text, p_user, patterns) OR erasure_mentions(target_id, p_user, patterns);
    UPDATE replay_jobs SET reason = erasure_scrub(reason, p_user, p_pseudonym, needles),
        filter = erasure_scrub_jsonb(filter, p_user, p_pseudonym, needles),
        last_error = erasure_scrub(last_error, p_user, p_pseudonym, needles)
    WHERE erasure_mentions(reason, p_user, patterns) OR erasure_mentions(filter::text, p_user, patterns)
       OR erasure_mentions(last_error, p_user, patterns);
    UPDATE replay_job_letters SET error = erasure_scrub(error, p_user, p_pseudonym, needles)
    WHERE erasure_mentions(error, p_user, patterns);
    UPDATE psp_disagreements SET subject = erasure_scrub(subject, p_user, p_pseudonym, needles),
        detail = erasure_scrub(detail, p_user, p_pseudonym, needles)
    WHERE erasure_mentions(subject, p_user, patterns) OR erasure_mentions(detail, p_user, patterns);
    UPDATE psp_reconciliation_runs SET report = erasure_scrub_jsonb(report, p_user, p_pseudonym, needles),
        disagreements = erasure_scrub_jsonb(disagreements, p_user, p_pseudonym, needles),
        error = erasure_scrub(error, p_user, p_pseudonym, needles)
    WHERE erasure_mentions(report::text, p_user, patterns) OR erasure_mentions(disagreements::text, p_user, patterns)
       OR erasure_mentions(error, p_user, patterns);
    UPDATE erasures SET reason = erasure_scrub(reason, p_user, p_pseudonym, needles)
    WHERE erasure_mentions(reason, p_user, patterns);
    UPDATE reconciliation_runs SET summary = erasure_scrub_jsonb(summary, p_user, p_pseudonym, needles)
    WHERE erasure_mentions(summary::text, p_user, patterns);

    RETURN counts || jsonb_build_object('needles', cardinality(needles));
END
$$;

REVOKE ALL ON FUNCTION erasure_literal(text), erasure_scrub(text, text, text, text[]),
    erasure_scrub_jsonb(jsonb, text, text, text[]), erasure_mentions(text, text, text[]), erasure_patterns(text[]),
    erasure_personal_key(text), erasure_needles(jsonb),
    erasure_redact(jsonb, text, text), erasure_redact_text(text, text, text, text[]),
    erasure_text(bytea), erasure_redact_bytes(bytea, text, text, text[], boolean),
    erase_user_data(text, text, text[], boolean) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION erase_user_data(text, text, text[], boolean) TO aegis_dlq_admin;
GRANT SELECT, INSERT, UPDATE ON erasures TO aegis_dlq_admin;
