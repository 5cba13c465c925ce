/* snowflake 1.1 -> 1.2 */
\echo Use "ALTER EXTENSION snowflake UPDATE TO '1.2'" to load this file. \quit

-- Floors come from reservations only, no longer from the clock.
COMMENT ON FUNCTION snowflake_repair_state(bigint) IS
'rewrite a damaged snowflake.state: continue above the given ID and every reservation replayed from WAL since the server started';

--
-- The node's identity: a copy, an upgrade or a restore of a node is held
-- back until it gets a worker id of its own or is confirmed as that node.
--
CREATE FUNCTION snowflake_identity_confirm(above bigint, old_data_directory text)
RETURNS bigint
AS 'MODULE_PATHNAME', 'snowflake_identity_confirm'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_identity_confirm(bigint, text) IS
'internal: mark this data directory as the node of its worker id, above the given floor';

REVOKE ALL ON FUNCTION snowflake_identity_confirm(bigint, text) FROM PUBLIC;

CREATE FUNCTION snowflake_confirm_node(above bigint DEFAULT NULL, old_data_directory text DEFAULT NULL)
RETURNS bigint
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE
SET search_path = pg_catalog, pg_temp
AS $$
DECLARE
	floor_id bigint := @extschema@.snowflake_identity_confirm(above, old_data_directory);
BEGIN
	-- the node's claim follows it to its new system identifier
	UPDATE @extschema@.snowflake_workers
	SET system_identifier = (SELECT system_identifier FROM pg_control_system())
	WHERE worker_id = @extschema@.snowflake_worker_id()
	  AND system_identifier <> (SELECT system_identifier FROM pg_control_system());
	RETURN floor_id;
END $$;

COMMENT ON FUNCTION snowflake_confirm_node(bigint, text) IS
'this server is the node of its worker id (restored, upgraded, moved): continue above the given ID or the old data directory''s state, and generate';

REVOKE ALL ON FUNCTION snowflake_confirm_node(bigint, text) FROM PUBLIC;

CREATE FUNCTION snowflake_identity_installed()
RETURNS void
AS 'MODULE_PATHNAME', 'snowflake_identity_installed'
LANGUAGE C VOLATILE PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_identity_installed() IS
'internal: the install script ran here, so a data directory without snowflake state is a fresh node';

REVOKE ALL ON FUNCTION snowflake_identity_installed() FROM PUBLIC;

CREATE FUNCTION snowflake_identity_claim_seen(worker_id integer, system_identifier bigint)
RETURNS void
AS 'MODULE_PATHNAME', 'snowflake_identity_claim_seen'
LANGUAGE C VOLATILE STRICT PARALLEL UNSAFE;

COMMENT ON FUNCTION snowflake_identity_claim_seen(integer, bigint) IS
'internal: another system''s claim of this node''s worker id holds the node back';

REVOKE ALL ON FUNCTION snowflake_identity_claim_seen(integer, bigint) FROM PUBLIC;

CREATE FUNCTION snowflake_workers_arrived()
RETURNS trigger
LANGUAGE plpgsql VOLATILE PARALLEL UNSAFE SECURITY DEFINER
SET search_path = pg_catalog, pg_temp
AS $$
BEGIN
	PERFORM @extschema@.snowflake_identity_claim_seen(NEW.worker_id, NEW.system_identifier);
	RETURN NULL;
END $$;

COMMENT ON FUNCTION snowflake_workers_arrived() IS
'trigger: a claim restored from another system''s dump holds this node back if it names its worker id';

REVOKE ALL ON FUNCTION snowflake_workers_arrived() FROM PUBLIC;

CREATE TRIGGER snowflake_workers_arrived AFTER INSERT ON snowflake_workers
FOR EACH ROW EXECUTE FUNCTION snowflake_workers_arrived();
