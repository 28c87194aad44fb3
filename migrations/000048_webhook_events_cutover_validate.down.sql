-- Nothing to undo: 000047's down drops the constraint.
SELECT 1;
