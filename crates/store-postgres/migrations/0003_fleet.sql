-- The replicas of the fleet: each one's latest heartbeat, and the leases of work that runs once.
CREATE TABLE mcpgw_replicas (
    replica_id TEXT PRIMARY KEY,
    version TEXT NOT NULL,
    started_at_us BIGINT NOT NULL,
    -- [{"id": "math", "state": "ready"}, ...]
    servers TEXT NOT NULL,
    heartbeat_at TIMESTAMPTZ NOT NULL
);

CREATE TABLE mcpgw_leases (
    name TEXT PRIMARY KEY,
    holder TEXT NOT NULL,
    expires_at TIMESTAMPTZ NOT NULL
);
