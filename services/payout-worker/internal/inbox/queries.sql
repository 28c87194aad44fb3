-- name: Claim :one
-- Records the message as processed; no row back when it already was.
INSERT INTO processed_events (consumer_group, event_id) VALUES (@consumer_group, @event_id)
ON CONFLICT DO NOTHING
RETURNING true AS claimed;

-- name: Processed :one
SELECT EXISTS (SELECT 1 FROM processed_events WHERE consumer_group = @consumer_group AND event_id = @event_id);
