-- Servers, groups, learned tool lists, API keys, roles, assignments, policies, local users
-- and discovery decisions.
--
-- Conventions of every table below:
-- - Keys and names that the gateway lists in order are `COLLATE "C"`: byte order, whatever
--   the database's default collation, and exact comparison.
-- - Times handed over by the gateway are BIGINT microseconds since the Unix epoch (UTC), so
--   that they round-trip exactly. `created_at` / `updated_at` of servers and groups are stamped
--   by the database for operators, and are never read back.
-- - JSON documents are TEXT, written and read back byte for byte (jsonb would reorder keys and
--   rewrite numbers).

-- Servers created at run time. `definition` is the serde form of a server definition without
-- its id, which is the row's key; `mode` is repeated so that it can be queried without JSON.
CREATE TABLE mcp_servers (
    id TEXT COLLATE "C" PRIMARY KEY,
    mode TEXT NOT NULL,
    definition TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- Groups created at run time. `definition` is the group's stored form without its id (the
-- members, in order, are part of it: a group is always read and written whole).
CREATE TABLE groups (
    id TEXT COLLATE "C" PRIMARY KEY,
    strategy TEXT NOT NULL,
    definition TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
);

-- The tool lists servers listed, one row per server id, whatever the server's origin (servers
-- of the configuration file have no row in `mcp_servers`, so there is no foreign key).
-- `tools` is a JSON array of MCP `Tool` objects.
CREATE TABLE tool_lists (
    server_id TEXT COLLATE "C" PRIMARY KEY,
    definition_digest TEXT NOT NULL,
    tools TEXT NOT NULL,
    learned_at BIGINT NOT NULL
);

-- API keys: the SHA-256 of the key (64 lowercase hex digits) and its listed prefix, never the
-- raw key. Keys are never deleted; a revoked key keeps its row.
CREATE TABLE api_keys (
    id TEXT COLLATE "C" PRIMARY KEY,
    name TEXT NOT NULL,
    principal TEXT NOT NULL,
    role TEXT,
    prefix TEXT NOT NULL,
    sha256 TEXT NOT NULL UNIQUE CHECK (length(sha256) = 64),
    created_at BIGINT NOT NULL,
    expires_at BIGINT,
    revoked_at BIGINT
);

-- Custom roles only (built-in ones live in code). `permissions`, `allow_list` and `deny_list`
-- are JSON arrays of strings in the order given. A policy's `scope` is the canonical name
-- (`provider`, `group`, `tool`).
CREATE TABLE custom_roles (
    name TEXT COLLATE "C" PRIMARY KEY,
    description TEXT NOT NULL,
    permissions TEXT NOT NULL
);

CREATE TABLE role_assignments (
    principal TEXT COLLATE "C" NOT NULL,
    role TEXT COLLATE "C" NOT NULL,
    scope TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (principal, role, scope)
);

CREATE TABLE tool_policies (
    scope TEXT COLLATE "C" NOT NULL,
    target_id TEXT COLLATE "C" NOT NULL,
    allow_list TEXT NOT NULL,
    deny_list TEXT NOT NULL,
    PRIMARY KEY (scope, target_id)
);

-- Local users, one row per name (compared exactly, case included). `password_hash` is the PHC
-- string of the password's hash, never the password.
CREATE TABLE users (
    name TEXT COLLATE "C" PRIMARY KEY,
    password_hash TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    password_changed_at BIGINT NOT NULL,
    disabled BOOLEAN NOT NULL
);

-- Discovery sources registered over the API: `config` is the source type's settings as a JSON
-- object, `mode` and `origin` their canonical names. Rejected candidates, one row per (source,
-- proposed name): `definition` is the rejected definition as a JSON object. A rejection has no
-- foreign key to its source: sources of the configuration file are not stored here, and their
-- rejections are.
CREATE TABLE discovery_sources (
    source_id TEXT COLLATE "C" PRIMARY KEY,
    source_type TEXT NOT NULL,
    mode TEXT NOT NULL,
    enabled BOOLEAN NOT NULL,
    config TEXT NOT NULL,
    origin TEXT NOT NULL
);

CREATE TABLE discovery_rejections (
    source_id TEXT COLLATE "C" NOT NULL,
    name TEXT COLLATE "C" NOT NULL,
    definition TEXT NOT NULL,
    rejected_at BIGINT NOT NULL,
    PRIMARY KEY (source_id, name)
);
