// IDs as text with the tools of a JavaScript team: npm's base32 and base62
// libraries read the server's strings as the same 64-bit values and write
// strings the server reads (those docs/text-ids.md names), the ones that
// encode bytes as a bit stream read another number; the strings sort as the
// IDs do in JavaScript's own order; and the recipes of docs/text-ids.md for
// node-postgres and Kysely send IDs that JSON.parse keeps exactly, where a
// bigint in Kysely's JSON helpers is rounded, and find a row from its
// string through the reader, also in upper case or with O for 0, and not
// from a string that is no ID (SQLSTATE class 22).  Connects with libpq's
// variables (test/text/run.sh sets them).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import { Kysely, PostgresDialect, sql } from 'kysely';
import { jsonArrayFrom, jsonObjectFrom } from 'kysely/helpers/postgres';
import { CrockfordBase32 } from 'crockford-base32';
import base62 from '@sindresorhus/base62';
import basex from 'base-x';
import { base32crockford } from '@scure/base';

const client = new pg.Client();
const db = new Kysely({ dialect: new PostgresDialect({ pool: new pg.Pool({ max: 2 }) }) });
let ids;	// [{ id, b32, b62 }], strings as the server wrote them

before(async () => {
	await client.connect();
	await client.query(`CREATE TABLE orders (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), item text);
		CREATE TABLE order_lines (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(),
			order_id bigint NOT NULL REFERENCES orders, name text);
		INSERT INTO orders (item) VALUES ('book'), ('pen'), ('ink');
		INSERT INTO order_lines (order_id, name) SELECT id, item || ' line ' || n FROM orders, generate_series(1, 2) n;`);
	// the edges, IDs just made, and a spread over the range
	const { rows } = await client.query(`
		SELECT id::text AS id, snowflake.snowflake_base32(id) AS b32, snowflake.snowflake_base62(id) AS b62
		FROM (SELECT unnest(ARRAY[1, 31, 32, 61, 62, 9007199254740993, 9223372036854775807]::bigint[]) AS id
			  UNION ALL SELECT id FROM orders UNION ALL SELECT id FROM order_lines
			  UNION ALL SELECT (n * 7919::numeric * 1000000000037 % 9223372036854775807)::bigint + 1
			  FROM generate_series(1, 300) n) s`);
	ids = rows;
});

after(async () => {
	await client.query('DROP TABLE order_lines, orders');
	await client.end();
	await db.destroy();
});

test('crockford-base32 (variant ulid) reads the server\'s base32 as the same 64-bit values', () => {
	for (const { id, b32 } of ids)
		assert.equal(CrockfordBase32.decode(b32, { variant: 'ulid', asNumber: true }), BigInt(id), b32);
});

test('crockford-base32 (variant ulid) writes, padded and in lower case, what the server writes; the server reads its upper case', async () => {
	for (const { id, b32 } of ids) {
		const theirs = CrockfordBase32.encode(BigInt(id), { variant: 'ulid' }).padStart(13, '0');
		assert.equal(theirs.toLowerCase(), b32);
		const { rows } = await client.query('SELECT snowflake.snowflake_from_base32($1)::text AS id', [theirs]);
		assert.equal(rows[0].id, id);
	}
});

test('the bit-stream encoders (crockford-base32\'s default, @scure/base) read another number: the docs say so', () => {
	const { id, b32 } = ids.find((r) => r.id === '9223372036854775807');
	assert.notEqual(CrockfordBase32.decode(b32, { asNumber: true }), BigInt(id));
	const bytes = new Uint8Array(8);
	new DataView(bytes.buffer).setBigUint64(0, BigInt(id));
	assert.notEqual(base32crockford.encode(bytes).toLowerCase(), b32);
});

test('@sindresorhus/base62 reads and writes the server\'s base62', async () => {
	for (const { id, b62 } of ids) {
		assert.equal(base62.decodeBigInt(b62), BigInt(id), b62);
		const theirs = base62.encodeBigInt(BigInt(id)).padStart(11, '0');
		assert.equal(theirs, b62);
		const { rows } = await client.query('SELECT snowflake.snowflake_from_base62($1)::text AS id', [theirs]);
		assert.equal(rows[0].id, id);
	}
});

test('base-x with 0-9A-Za-z reads the server\'s base62 as the same bytes', () => {
	const b = basex('0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz');
	for (const { id, b62 } of ids) {
		const v = [...b.decode(b62)].reduce((acc, byte) => (acc << 8n) | BigInt(byte), 0n);
		assert.equal(v, BigInt(id), b62);
	}
});

test('the docs\' BigInt reader and writer agree with the server', () => {
	const B32 = '0123456789abcdefghjkmnpqrstvwxyz';
	const fromBase32 = (s) => [...s.toLowerCase().replace(/[il]/g, '1').replace(/o/g, '0')]
		.reduce((v, c) => v * 32n + BigInt(B32.indexOf(c)), 0n).toString();
	const toBase32 = (id) => { let v = BigInt(id), s = ''; for (let i = 0; i < 13; i++, v >>= 5n) s = B32[Number(v & 31n)] + s; return s; };
	for (const { id, b32 } of ids) {
		assert.equal(fromBase32(b32.toUpperCase()), id);
		assert.equal(toBase32(id), b32);
	}
});

test('sorted as JavaScript sorts strings, the forms are in the IDs\' order', () => {
	const byId = [...ids].sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : BigInt(a.id) > BigInt(b.id) ? 1 : 0));
	assert.deepEqual([...ids].sort((a, b) => (a.b32 < b.b32 ? -1 : 1)).map((r) => r.id), byId.map((r) => r.id));
	assert.deepEqual([...ids].sort((a, b) => (a.b62 < b.b62 ? -1 : 1)).map((r) => r.id), byId.map((r) => r.id));
});

// the recipes' lookup: the item of a public ID in any form the reader
// takes; a string that is no ID (SQLSTATE class 22) finds nothing
const itemOf = async (publicId) => {
	try {
		const { rows } = await client.query(
			`SELECT item FROM orders WHERE id = snowflake.snowflake_from_base32($1, 'order')`, [publicId]);
		return rows[0]?.item;
	} catch (e) {
		if (e.code?.startsWith('22')) return undefined;
		throw e;
	}
};
const variant = (publicId) => 'order_' + publicId.slice(6).toUpperCase().replaceAll('0', 'O');

test('node-postgres recipe: the typed form in JSON survives JSON.parse and finds its row', async () => {
	const { rows } = await client.query(
		`SELECT snowflake.snowflake_base32(id, 'order') AS id, item FROM orders ORDER BY orders.id`);
	const received = JSON.parse(JSON.stringify(rows));	// what a browser reads
	assert.match(received[0].id, /^order_[0-7][0-9a-hjkmnp-tv-z]{12}$/);
	for (const [i, r] of received.entries()) {
		assert.equal(await itemOf(r.id), rows[i].item);
		assert.equal(await itemOf(variant(r.id)), rows[i].item, `${variant(r.id)} finds it too`);
	}
	for (const s of ['order_0000-0000-0001', 'order_8000000000000', 'user_14y6vtn380w0s', 'nonsense'])
		assert.equal(await itemOf(s), undefined, `${s} finds nothing`);
});

test('Kysely: a bigint in jsonArrayFrom comes back as a number, rounded', async () => {
	const rows = await db.selectFrom('orders as o').select((eb) => [
		'o.id',
		jsonArrayFrom(eb.selectFrom('order_lines as l').select(['l.id', 'l.name'])
			.whereRef('l.order_id', '=', 'o.id')).as('lines'),
	]).execute();
	const lines = rows.flatMap((r) => r.lines);
	assert.equal(typeof rows[0].id, 'string', 'plain selects are strings');
	assert.equal(typeof lines[0].id, 'number', 'inside the JSON helper a number');
	const exact = (await client.query('SELECT id::text AS id FROM order_lines')).rows.map((r) => r.id);
	assert.ok(lines.some((l) => !exact.includes(String(BigInt(l.id)))), 'and some are no longer the IDs');
});

test('Kysely recipe: the text form in jsonArrayFrom and jsonObjectFrom is exact', async () => {
	const rows = await db.selectFrom('orders as o').select((eb) => [
		'o.item',
		jsonArrayFrom(eb.selectFrom('order_lines as l')
			.select([sql`snowflake.snowflake_base32(l.id)`.as('id'), 'l.name'])
			.whereRef('l.order_id', '=', 'o.id')).as('lines'),
		jsonObjectFrom(eb.selectFrom('orders as p')
			.select([sql`snowflake.snowflake_base62(p.id)`.as('id')])
			.whereRef('p.id', '=', 'o.id')).as('self'),
	]).execute();
	const received = JSON.parse(JSON.stringify(rows));
	const lines = received.flatMap((r) => r.lines);
	assert.equal(lines.length, 6);
	for (const l of lines) {
		const { rows: r } = await client.query('SELECT name FROM order_lines WHERE id = snowflake.snowflake_from_base32($1)', [l.id]);
		assert.equal(r[0]?.name, l.name, `${l.id} finds its line`);
	}
	for (const o of received) {
		const { rows: r } = await client.query('SELECT item FROM orders WHERE id = snowflake.snowflake_from_base62($1)', [o.self.id]);
		assert.equal(r[0]?.item, o.item);
	}
});

test('Kysely recipe: a row found by its public ID through the reader, in any form it takes', async () => {
	const { rows } = await client.query(`SELECT snowflake.snowflake_base32(id, 'order') AS public_id, item FROM orders`);
	for (const { public_id: publicId, item } of rows) {
		for (const s of [publicId, variant(publicId)]) {
			const order = await db.selectFrom('orders').select('item')
				.where('id', '=', sql`snowflake.snowflake_from_base32(${s}, 'order')`).executeTakeFirst();
			assert.equal(order?.item, item, s);
		}
	}
});
