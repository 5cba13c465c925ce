// What the JavaScript ORM tests share: the connection (libpq's variables,
// as test/orm/run.sh sets them), and the checks every key must pass.
import assert from 'node:assert/strict';

export const conn = {
	host: process.env.PGHOST,
	port: Number(process.env.PGPORT || 5432),
	user: process.env.PGUSER,
	database: process.env.PGDATABASE,
};

// the search_path README recommends for an application's sessions, which
// its role has (ALTER ROLE app SET ...), and the one README recommends
// against for them: snowflake in it, as for a person typing in psql
export const APP_SEARCH_PATH = '"$user", public';
export const OPTIONS_WITH_SNOWFLAKE = '-c search_path=public,snowflake';

// the default layout, decoded in the client: 41 bits of ms since
// 2016-11-01, 10 bits of worker id, 12 bits of sequence
const EPOCH_MS = 1477958400000n;
export function decode(id) {
	const v = BigInt(id);
	return { ms: ((v >> 22n) + EPOCH_MS).toString(), worker: Number((v >> 12n) & 1023n), seq: Number(v & 4095n) };
}

// query(sql, [id]) runs sql with $1 = id through the ORM and returns rows.
// An ORM's key is exact when it is a string, equals what the server holds
// (as text, so nothing rounds it on the way), is above 2^53 (so a number
// would have rounded it), and decodes the same in the client and the
// server, with the node's worker id.
export async function assertExactKey(query, id, table) {
	assert.equal(typeof id, 'string', `the key is a string, not a ${typeof id}`);
	assert.match(id, /^[1-9][0-9]*$/);
	assert.ok(BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER), `${id} is above 2^53`);
	const rows = await query(`SELECT id::text AS id FROM ${table} WHERE id = $1::bigint`, [id]);
	assert.deepEqual(rows.map((r) => r.id), [id], 'the row holds exactly that key');
	const [d] = await query(`SELECT (extract(epoch FROM ts) * 1000)::bigint::text AS ms, worker_id AS worker, seq
		FROM snowflake.snowflake_decode($1::bigint)`, [id]);
	assert.deepEqual(decode(id), { ms: d.ms, worker: d.worker, seq: d.seq }, 'decoded alike in the client and the server');
	assert.equal(d.worker, 7, 'made by this node');
}

// the stored default of table.column as PostgreSQL prints it in the
// session that runs query
export async function columnDefault(query, table, column = 'id') {
	const rows = await query(`SELECT column_default FROM information_schema.columns
		WHERE table_schema = 'public' AND table_name = $1 AND column_name = '${column}'`, [table]);
	assert.equal(rows.length, 1, `${table}.${column} exists`);
	return rows[0].column_default;
}
