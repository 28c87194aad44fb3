DROP VIEW payouts_for_api, payout_transitions_for_api;
