// Snowflake IDs through node-postgres and JSON.  IDs of the default layout
// exceed 2^53, the largest integer a JavaScript number holds exactly: they
// survive as strings (the documented way) and are rounded as numbers.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';

const client = new pg.Client();	// PGHOST, PGPORT, PGUSER, PGDATABASE
let id;

before(async () => {
	await client.connect();
	await client.query(`CREATE TABLE IF NOT EXISTS js_orders (
		id bigint PRIMARY KEY DEFAULT snowflake_nextval(), item text)`);
	// an ID whose low bits are all zero (1 in 64) is exact as a double;
	// take one that is not, so that the rounding below is certain
	for (let i = 0; i < 100; i++) {
		const g = await client.query('SELECT snowflake_nextval()::text AS id');
		id = g.rows[0].id;
		if (BigInt(Number(id)) !== BigInt(id))
			break;
	}
	await client.query(`INSERT INTO js_orders (id, item) VALUES ($1, 'book')`, [id]);
});

after(async () => {
	await client.query('DROP TABLE js_orders');
	await client.end();
});

test('node-postgres hands a bigint over as a string, exactly', () => {
	assert.equal(typeof id, 'string');
	assert.ok(BigInt(id) > BigInt(Number.MAX_SAFE_INTEGER), 'the ID is above 2^53');
});

test('as a JSON number the ID is rounded: the loss the documented way avoids', async () => {
	const r = await client.query('SELECT row_to_json(o) AS j FROM js_orders o');
	const asNumber = r.rows[0].j.id;
	assert.equal(typeof asNumber, 'number');
	assert.notEqual(BigInt(asNumber), BigInt(id), 'JSON.parse rounded the ID');
	assert.ok(!Number.isSafeInteger(asNumber));
});

test('as text in JSON the ID survives a round trip', async () => {
	const r = await client.query(
		`SELECT json_build_object('id', id::text, 'item', item) AS j FROM js_orders`);
	const sent = JSON.stringify(r.rows[0].j);	// what an API would send
	const received = JSON.parse(sent);		// what a browser would read
	assert.equal(received.id, id);
	const back = await client.query('SELECT item FROM js_orders WHERE id = $1', [received.id]);
	assert.equal(back.rows[0].item, 'book', 'the string finds the row');
});

test('to_jsonb(id::text) inside a document works the same', async () => {
	const r = await client.query(
		`SELECT to_jsonb(o) || jsonb_build_object('id', o.id::text) AS j FROM js_orders o`);
	assert.equal(JSON.parse(JSON.stringify(r.rows[0].j)).id, id);
});

test('BigInt does exact arithmetic on the string', async () => {
	const next = (BigInt(id) + 1n).toString();
	const r = await client.query('SELECT $1::bigint - 1 AS prev', [next]);
	assert.equal(r.rows[0].prev, id);
});

test('IDs of the javascript layout fit a JavaScript number', async () => {
	const r = await client.query(
		`SELECT snowflake_from_timestamp(now(), 'javascript') + 1000 AS js_id,
		        (SELECT max_id FROM snowflake_layouts() WHERE name = 'javascript') AS max_id`);
	assert.ok(Number.isSafeInteger(Number(r.rows[0].js_id)));
	assert.equal(BigInt(r.rows[0].max_id), BigInt(Number.MAX_SAFE_INTEGER));
});
