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

// The README's recipes for keys assigned before the insert.  One call
// reserves a block; the client counts through it with BigInt and sends
// every ID as a string, so no digit is lost on the way.
function idsOf(first, n) {
	const ids = [];
	for (let i = 0n; i < BigInt(n); i++)
		ids.push((BigInt(first) + i).toString());
	return ids;
}

test('pooled-lo: one block, IDs first .. first + n - 1 assigned by the client', async () => {
	const n = 50;
	const before = (await client.query('SELECT snowflake_nextval()::text AS id')).rows[0].id;
	const r = await client.query('SELECT snowflake_nextval_block($1)::text AS first', [n]);
	const ids = idsOf(r.rows[0].first, n);
	await client.query('CREATE TEMP TABLE js_pooled (id bigint PRIMARY KEY, item text)');
	for (const [i, pk] of ids.entries())
		await client.query('INSERT INTO js_pooled VALUES ($1, $2)', [pk, `item ${i}`]);
	const after = (await client.query('SELECT snowflake_nextval()::text AS id')).rows[0].id;

	const back = await client.query(
		`SELECT id::text AS id, (snowflake_decode(id)).worker_id AS worker,
		        snowflake_worker_id() AS node
		   FROM js_pooled ORDER BY id`);
	assert.deepEqual(back.rows.map((row) => row.id), ids, 'every ID round-trips exactly');
	for (const row of back.rows)
		assert.equal(row.worker, row.node, 'a block carries this node\'s worker id');
	assert.ok(BigInt(ids[0]) > BigInt(before), 'above the ID issued before the block');
	assert.ok(BigInt(ids[n - 1]) < BigInt(after), 'below the ID issued after it');
	await client.query('DROP TABLE js_pooled');
});

test('a batch of parents and children, keys from a block, in one transaction', async () => {
	await client.query(`CREATE TEMP TABLE js_parent (id bigint PRIMARY KEY, name text)`);
	await client.query(`CREATE TEMP TABLE js_child (
		id bigint PRIMARY KEY DEFAULT snowflake_nextval(),
		parent_id bigint NOT NULL REFERENCES js_parent, name text)`);
	const parents = [
		{ name: 'order A', children: ['line 1', 'line 2'] },
		{ name: 'order B', children: ['line 1'] },
		{ name: 'order C', children: ['line 1', 'line 2', 'line 3'] },
	];
	await client.query('BEGIN');
	const first = (await client.query('SELECT snowflake_nextval_block($1)::text AS first',
		[parents.length])).rows[0].first;
	const ids = idsOf(first, parents.length);
	parents.forEach((p, i) => { p.id = ids[i]; });
	await client.query(
		`INSERT INTO js_parent (id, name)
		 SELECT * FROM unnest($1::bigint[], $2::text[])`,
		[parents.map((p) => p.id), parents.map((p) => p.name)]);
	const kids = parents.flatMap((p) => p.children.map((c) => [p.id, c]));
	await client.query(
		`INSERT INTO js_child (parent_id, name)
		 SELECT * FROM unnest($1::bigint[], $2::text[])`,
		[kids.map((k) => k[0]), kids.map((k) => k[1])]);
	await client.query('COMMIT');

	const back = await client.query(
		`SELECT p.id::text AS id, p.name, count(c.id)::int AS children
		   FROM js_parent p LEFT JOIN js_child c ON c.parent_id = p.id
		  GROUP BY p.id, p.name ORDER BY p.id`);
	assert.deepEqual(back.rows,
		parents.map((p) => ({ id: p.id, name: p.name, children: p.children.length })),
		'every parent is found by the ID the client gave it, with its children');
	// the foreign key holds: a child of an ID outside the block is refused
	const outside = (BigInt(ids[ids.length - 1]) + 1n).toString();
	await assert.rejects(
		client.query(`INSERT INTO js_child (parent_id, name) VALUES ($1, 'orphan')`, [outside]),
		/violates foreign key constraint/);
	await client.query('DROP TABLE js_child, js_parent');
});
