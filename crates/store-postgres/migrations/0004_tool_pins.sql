-- The tool pin ledger: one row per (owner, tool), the server or group whose tool it is and the
-- tool's upstream name. `pinned` is the trusted definition and `observed` the one the server
-- reports when it differs, each a JSON object or NULL when the record has none. Like the tool
-- lists, there is no foreign key: servers of the configuration file have pins and no row in
-- `mcp_servers`.
--
-- The JSON is TEXT, as in every other table: jsonb would refuse a definition whose text holds
-- the escape of a NUL character, which any upstream server can report, and the ledger must be
-- able to keep whatever a server reported in order to withhold it.
CREATE TABLE tool_pins (
    owner TEXT COLLATE "C" NOT NULL,
    tool TEXT COLLATE "C" NOT NULL,
    pinned TEXT,
    observed TEXT,
    PRIMARY KEY (owner, tool)
);
