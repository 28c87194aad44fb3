-- Stripe pays out to other people only through Connect: a transfer to the
-- user's connected account (acct_…), then, when its registration names one
-- of its external accounts, a payout from that account to it. A bare
-- Stripe external account (ba_…, card_…) registered on its own is one of
-- the platform's: a payout to it moves the platform's balance to the
-- platform's bank, not to the user. webhook-api now refuses to register
-- one (422 destination_not_connected_account); this disables the active
-- ones registered before, so that no new payout is accepted for them, and
-- says why and what to register instead. Payouts already accepted keep
-- their destination and are sent as before (docs/guides/stripe-connect-migration.md:
-- wait for or cancel those still INITIALIZED before migrating).
-- Data only: the previous release reads a disabled destination as this
-- one does (payouts to it answer 422 destination_not_registered).
-- Idempotent: only active rows change.
SET lock_timeout = '5s';

UPDATE destinations
SET status = 'disabled', disabled_at = now(), disabled_by = 'migration 000039',
    disabled_reason = 'a bare Stripe external account is one of the platform''s own, not the user''s. '
        'Stripe pays out to other people only through Connect: register the user''s connected account (acct_…) '
        'as destination and, to pay out to one of its bank accounts or cards, that one as external_account'
WHERE provider = 'stripe' AND status = 'active' AND destination !~ '^acct_';
