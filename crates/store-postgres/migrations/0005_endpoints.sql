-- Curated endpoints created at run time, one row per endpoint name (compared byte for byte,
-- case included). `spec` is the whole definition in the domain's serde form, its name
-- included, read and written whole.
--
-- Unlike the other tables' JSON, `spec` is jsonb, so that operators can query the selections
-- and access rules in place. The definition is decoded into typed values, so what jsonb
-- changes (the order of an object's keys, the spelling of a number, never its value) is not
-- seen; what jsonb cannot hold (a string with the NUL character) the store refuses before it
-- writes, naming the endpoint.
CREATE TABLE endpoints (
    name TEXT COLLATE "C" PRIMARY KEY,
    spec JSONB NOT NULL
);
