// Drizzle ORM and drizzle-kit with snowflake keys, as docs/orms.md's
// "Drizzle" says: its schema (drizzle-schema.mjs) and drizzle-kit configuration
// (drizzle.config.mjs), drizzle-kit run as its users run it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync, readdirSync } from 'node:fs';
import pg from 'pg';
import { drizzle } from 'drizzle-orm/node-postgres';
import { eq, inArray, asc, sql } from 'drizzle-orm';
import { pgTable, bigint, text } from 'drizzle-orm/pg-core';
import { orders, orderLines } from './drizzle-schema.mjs';
import { conn, APP_SEARCH_PATH, assertExactKey, columnDefault } from './common.mjs';

const DEFAULT = 'snowflake.snowflake_nextval()';

const pool = new pg.Pool(conn);
const db = drizzle(pool);
const q = async (text, params) => (await pool.query(text, params)).rows;

after(() => pool.end());

// drizzle-kit COMMAND [env]: its output, which must succeed
function kit(command, env = {}) {
	const r = spawnSync('node_modules/.bin/drizzle-kit', [command, '--config', 'drizzle.config.mjs', ...(command === 'push' ? ['--force', '--verbose'] : [])],
		{ env: { ...process.env, ...env }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
	const out = `${r.stdout}${r.stderr}`;
	assert.equal(r.status, 0, `drizzle-kit ${command} failed:\n${out}`);
	return out;
}

test('the application\'s sessions run with README\'s search_path, without snowflake', async () => {
	const [{ search_path }] = await q('SHOW search_path');
	assert.equal(search_path, APP_SEARCH_PATH);
});

test('drizzle-kit push makes the tables; run again, it finds no change', () => {
	const first = kit('push');
	assert.match(first, /CREATE TABLE "orders" \(\s*"id" bigint PRIMARY KEY DEFAULT snowflake\.snowflake_nextval\(\) NOT NULL/);
	assert.match(kit('push'), /No changes detected/);
});

test('the tables have the default; drizzle-kit push, also as a role that sees the extension\'s schema, leaves it alone', async () => {
	assert.equal(await columnDefault(q, 'orders'), DEFAULT);
	assert.equal(await columnDefault(q, 'order_lines'), DEFAULT);
	// a superuser, with the application's search_path
	const out = kit('push', { PGUSER: 'postgres', PGOPTIONS: '-c search_path=public' });
	assert.match(out, /No changes detected/);
	assert.doesNotMatch(out, /snowflake_workers|DROP SCHEMA/i);
});

test('drizzle-kit generate writes the tables with the default; run again, no schema changes', () => {
	const first = kit('generate');
	assert.match(first, /Your SQL migration file/);
	const files = readdirSync('drizzle').filter((f) => f.endsWith('.sql'));
	assert.equal(files.length, 1, files.join(', '));
	const migration = readFileSync(`drizzle/${files[0]}`, 'utf8');
	assert.equal(migration.match(/"id" bigint PRIMARY KEY DEFAULT snowflake\.snowflake_nextval\(\) NOT NULL/g)?.length, 2, migration);
	assert.match(kit('generate'), /No schema changes, nothing to migrate/);
});

test('insert() takes the key from the default and reads it back exactly, as a bigint', async () => {
	const rows = await db.insert(orders).values([{ item: 'book' }, { item: 'pen' }, { item: 'ink' }]).returning();
	assert.equal(rows.length, 3);
	for (const r of rows) {
		assert.equal(typeof r.id, 'bigint');
		await assertExactKey(q, String(r.id), 'orders');
	}
	assert.equal(new Set(rows.map((r) => r.id)).size, 3);
	const found = await db.select().from(orders).where(eq(orders.id, rows[0].id));
	assert.deepEqual(found, [{ id: rows[0].id, item: 'book' }]);
});

test('README\'s block recipe: parents keyed from one block, children naming them, one transaction', async () => {
	let first;
	await db.transaction(async (tx) => {
		const [{ block }] = (await tx.execute(sql`SELECT snowflake.snowflake_nextval_block(2)::text AS block`)).rows;
		first = BigInt(block);
		await tx.insert(orders).values([{ id: first, item: 'order A' }, { id: first + 1n, item: 'order B' }]);
		await tx.insert(orderLines).values([{ orderId: first, name: 'line 1' }, { orderId: first, name: 'line 2' },
			{ orderId: first + 1n, name: 'line 1' }]);
	});
	await assertExactKey(q, String(first), 'orders');
	await assertExactKey(q, String(first + 1n), 'orders');
	const lines = await db.select({ id: orderLines.id, orderId: orderLines.orderId, item: orders.item, name: orderLines.name })
		.from(orderLines).innerJoin(orders, eq(orderLines.orderId, orders.id))
		.where(inArray(orderLines.orderId, [first, first + 1n])).orderBy(asc(orderLines.id));
	assert.deepEqual(lines.map((l) => [l.orderId, l.item, l.name]),
		[[first, 'order A', 'line 1'], [first, 'order A', 'line 2'], [first + 1n, 'order B', 'line 1']]);
	for (const l of lines) {
		await assertExactKey(q, String(l.id), 'order_lines');
		assert.ok(l.id > first + 1n, 'a child\'s own key comes after the block');
	}
});

test('drizzle-kit pull writes mode: "number", which rounds the keys: keys become one, a lookup misses its row', async () => {
	const out = kit('pull');
	assert.match(out, /schema file is ready/);
	const pulled = readFileSync('drizzle/schema.ts', 'utf8');
	assert.match(pulled, /export const orders = pgTable\("orders", \{\n\t\/\/ You can use \{ mode: "bigint" \} if numbers are exceeding js number limitations\n\tid: bigint\(\{ mode: "number" \}\)\.default\(sql`snowflake\.snowflake_nextval\(\)`\)/, pulled);
	// the pulled declaration at work: ten keys of one statement, made in
	// one or two ticks, are consecutive and round to fewer numbers
	const pulledOrders = pgTable('orders', {
		id: bigint({ mode: 'number' }).default(sql`snowflake.snowflake_nextval()`).primaryKey().notNull(),
		item: text().notNull(),
	});
	const rows = await db.insert(pulledOrders).values(Array.from({ length: 10 }, (_, i) => ({ item: `rounded ${i}` }))).returning();
	assert.ok(new Set(rows.map((r) => r.id)).size < 10, 'distinct keys became one number');
	const exact = await q('SELECT id::text AS id, item FROM orders WHERE item LIKE $1', ['rounded %']);
	assert.equal(exact.length, 10);
	let missed = 0;
	for (const r of rows) {
		const held = exact.find((e) => e.item === r.item).id;
		if (String(BigInt(r.id)) === held)
			continue;
		// the key as the application has it finds nothing, or another row
		const found = await db.select().from(pulledOrders).where(eq(pulledOrders.id, r.id));
		assert.ok(found.every((f) => f.item !== r.item), `${r.id} found the row of ${held}`);
		missed++;
	}
	assert.ok(missed > 0, 'a key above 2^53 rounds (1 in 256 does not)');
});
