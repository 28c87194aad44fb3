-- 000047's down drops the constraint; the keys go with 000044's table.
SELECT 1;
