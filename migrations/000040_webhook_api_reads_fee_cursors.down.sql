DROP VIEW IF EXISTS psp_fee_cursors_for_api;
