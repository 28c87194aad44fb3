DROP TABLE IF EXISTS psp_fee_cursors;
