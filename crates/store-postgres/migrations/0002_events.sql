-- The event log, one table for every replica.
--
-- `position` is the fleet's order of events. The database assigns it as a batch is inserted,
-- and every writer takes the event log's append lock (a transaction-level advisory lock) before
-- inserting, so positions are handed out and committed in the same order: whoever has seen
-- position p has seen every smaller position that will ever exist.
--
-- `replica` names the gateway replica that wrote the row. `event_id` is the id that replica's
-- gateway gave the event; two replicas may give the same id, so it is not a key.
-- `occurred_at` is microseconds since the Unix epoch (UTC), as the event carried it. `payload`
-- is the event as clients see it on the event stream (its fields with `event_type`, plus
-- `event_id` and `occurred_at` as strings), kept as the exact text that was written.
-- `mcp_server_id` is the server the event concerns (for a group member's event the member) and
-- `group_id` the group, when there is one.
--
-- The partial index serves the tool history, which reads one server's invocations newest
-- first; the index on `occurred_at` serves compaction by age.
CREATE DOMAIN event_replica AS TEXT
    CONSTRAINT event_replica_not_empty CHECK (VALUE <> '');

CREATE TABLE events (
    position BIGSERIAL PRIMARY KEY,
    replica event_replica NOT NULL,
    event_id BIGINT NOT NULL CONSTRAINT events_event_id_not_negative CHECK (event_id >= 0),
    occurred_at BIGINT NOT NULL,
    event_type TEXT NOT NULL,
    mcp_server_id TEXT,
    group_id TEXT,
    payload JSON NOT NULL
);

CREATE INDEX events_by_occurred_at ON events (occurred_at);

CREATE INDEX events_tool_invocations ON events (mcp_server_id, event_id, position)
    WHERE event_type IN ('ToolInvocationCompleted', 'ToolInvocationFailed');

-- One row: the largest event id and the largest position ever written. Each batch raises them
-- in its own transaction; compaction never lowers them.
CREATE TABLE event_log_state (
    id INTEGER PRIMARY KEY CONSTRAINT event_log_state_one_row CHECK (id = 1),
    last_event_id BIGINT NOT NULL,
    last_position BIGINT NOT NULL
);

INSERT INTO event_log_state (id, last_event_id, last_position) VALUES (1, 0, 0);
