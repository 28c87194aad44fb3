-- Re-enables the destinations 000039 disabled, and only those: one per
-- (user, provider, destination), the newest, and none whose value was
-- registered again meanwhile (destinations_active_key allows one active
-- row per user, provider and destination).
SET lock_timeout = '5s';

UPDATE destinations d
SET status = 'active', disabled_at = NULL, disabled_by = NULL, disabled_reason = NULL
WHERE d.id IN (SELECT DISTINCT ON (user_id, provider, destination) id
               FROM destinations
               WHERE disabled_by = 'migration 000039' AND status = 'disabled'
               ORDER BY user_id, provider, destination, created_at DESC, id DESC)
  AND NOT EXISTS (SELECT 1 FROM destinations a
                  WHERE a.user_id = d.user_id AND a.provider = d.provider AND a.destination = d.destination
                    AND a.status = 'active');
