// TypeORM with snowflake keys, as README's "TypeORM" says.  The entities
// are README's TypeScript, with each decorator applied as TypeScript's
// compiler applies it (Entity('orders')(Order) for @Entity('orders')).
import 'reflect-metadata';
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { DataSource, Entity, PrimaryColumn, PrimaryGeneratedColumn, Column, ManyToOne, JoinColumn } from 'typeorm';
import { conn, APP_SEARCH_PATH, OPTIONS_WITH_SNOWFLAKE, assertExactKey, columnDefault } from './common.mjs';

const DEFAULT = 'snowflake.snowflake_nextval()';

// @Entity(table) class { @PrimaryColumn({ type: 'bigint', default: () => declared }) id: string;
//                        @Column('text') item: string; }
function orderEntity(table, declared = DEFAULT) {
	const C = { [table]: class {} }[table];
	Entity(table)(C);
	PrimaryColumn({ type: 'bigint', default: () => declared })(C.prototype, 'id');
	Column('text')(C.prototype, 'item');
	return C;
}

const Order = orderEntity('orders');
// @Entity('order_lines') class OrderLine { @PrimaryColumn(... as above) id: string;
//   @ManyToOne(() => Order) @JoinColumn({ name: 'order_id' }) order: Order; @Column('text') name: string; }
class OrderLine {}
Entity('order_lines')(OrderLine);
PrimaryColumn({ type: 'bigint', default: () => DEFAULT })(OrderLine.prototype, 'id');
// TypeScript applies a property's decorators from the last up
JoinColumn({ name: 'order_id' })(OrderLine.prototype, 'order');
ManyToOne(() => Order)(OrderLine.prototype, 'order');
Column('text')(OrderLine.prototype, 'name');

let statements = [];
const logger = { logQuery: (sql) => statements.push(sql), logQueryError() {}, logQuerySlow() {}, logSchemaBuild() {}, logMigration() {}, log() {} };
const sources = [];
async function open(entities, extra = {}) {
	const ds = new DataSource({ type: 'postgres', ...conn, username: conn.user, entities, extra, logger, logging: ['query'] });
	await ds.initialize();
	sources.push(ds);
	return ds;
}
// what synchronize would run now (migration:generate writes the same)
async function plan(ds) {
	return (await ds.driver.createSchemaBuilder().log()).upQueries.map((q) => q.query);
}

const app = await open([Order, OrderLine]);
const q = (sql, params) => app.query(sql, params);

after(async () => {
	for (const ds of sources)
		await ds.destroy();
});

test('the application\'s sessions run with README\'s search_path, without snowflake', async () => {
	const [{ search_path }] = await q('SHOW search_path');
	assert.equal(search_path, APP_SEARCH_PATH);
});

test('synchronize makes the tables; run again, it plans nothing', async () => {
	const first = await plan(app);
	assert.ok(first.some((s) => s.startsWith('CREATE TABLE "orders"') && s.includes(`DEFAULT ${DEFAULT}`)), first.join('\n'));
	await app.synchronize();
	assert.equal(await columnDefault(q, 'orders'), DEFAULT);
	assert.equal(await columnDefault(q, 'order_lines'), DEFAULT);
	assert.deepEqual(await plan(app), []);
	await app.synchronize();
	assert.deepEqual(await plan(app), [], 'nothing after a second synchronize either');
});

test('save() takes the key from the default and reads it back exactly, as a string', async () => {
	const repo = app.getRepository(Order);
	statements = [];
	const one = await repo.save(repo.create({ item: 'book' }));
	assert.ok(statements.includes('INSERT INTO "orders"("id", "item") VALUES (DEFAULT, $1) RETURNING "id"'), statements.join('\n'));
	await assertExactKey(q, one.id, 'orders');
	const found = await repo.findOneBy({ id: one.id });
	assert.equal(found.id, one.id);
	assert.equal(found.item, 'book');

	const many = await repo.save([repo.create({ item: 'pen' }), repo.create({ item: 'ink' })]);
	for (const o of many)
		await assertExactKey(q, o.id, 'orders');
	const rows = await q('SELECT id::text AS id, item FROM orders WHERE item IN ($1, $2) ORDER BY id', ['pen', 'ink']);
	assert.deepEqual(rows, many.map((o) => ({ id: o.id, item: o.item })).sort((a, b) => (BigInt(a.id) < BigInt(b.id) ? -1 : 1)));
	statements = [];
	const ins = await repo.insert({ item: 'paper' });
	assert.deepEqual(statements, ['INSERT INTO "orders"("id", "item") VALUES (DEFAULT, $1) RETURNING "id"']);
	await assertExactKey(q, ins.identifiers[0].id, 'orders');
});

test('README\'s block recipe: parents keyed from one block, children naming them, one transaction', async () => {
	let first;
	await app.transaction(async (em) => {
		[{ first }] = await em.query('SELECT snowflake.snowflake_nextval_block($1) AS first', [2]);
		const id = (i) => (BigInt(first) + BigInt(i)).toString();
		const orders = [em.create(Order, { id: id(0), item: 'order A' }), em.create(Order, { id: id(1), item: 'order B' })];
		await em.save(orders);
		await em.save([
			em.create(OrderLine, { order: orders[0], name: 'line 1' }),
			em.create(OrderLine, { order: orders[0], name: 'line 2' }),
			em.create(OrderLine, { order: orders[1], name: 'line 1' }),
		]);
	});
	assert.equal(typeof first, 'string');
	const second = (BigInt(first) + 1n).toString();
	await assertExactKey(q, first, 'orders');
	await assertExactKey(q, second, 'orders');
	const lines = await app.getRepository(OrderLine).find({ relations: { order: true }, order: { id: 'ASC' } });
	assert.deepEqual(lines.map((l) => [l.order.id, l.order.item, l.name]),
		[[first, 'order A', 'line 1'], [first, 'order A', 'line 2'], [second, 'order B', 'line 1']]);
	for (const l of lines) {
		await assertExactKey(q, l.id, 'order_lines');
		assert.ok(BigInt(l.id) > BigInt(second), 'a child\'s own key comes after the block');
	}
});

test('snowflake in the tool\'s search_path: the same declaration plans SET DEFAULT on every run', async () => {
	const T = orderEntity('sp_orders');
	const ds = await open([T], { options: OPTIONS_WITH_SNOWFLAKE });
	await ds.synchronize();
	const sp = (sql, params) => ds.query(sql, params);
	assert.equal(await columnDefault(sp, 'sp_orders'), 'snowflake_nextval()', 'PostgreSQL prints it unqualified');
	assert.equal(await columnDefault(q, 'sp_orders'), DEFAULT, 'and qualified where snowflake is not in search_path');
	const phantom = [`ALTER TABLE "sp_orders" ALTER COLUMN "id" SET DEFAULT ${DEFAULT}`];
	assert.deepEqual(await plan(ds), phantom);
	await ds.synchronize();
	assert.deepEqual(await plan(ds), phantom, 'and again after it ran');
});

test('an unqualified declaration matches only where snowflake is in search_path, and takes what comes first there', async () => {
	const T = orderEntity('bare_orders', 'snowflake_nextval()');
	const without = await open([T]);
	await assert.rejects(without.synchronize(), /function snowflake_nextval\(\) does not exist/);

	const ds = await open([T], { options: OPTIONS_WITH_SNOWFLAKE });
	await ds.synchronize();
	assert.deepEqual(await plan(ds), []);
	assert.equal(await columnDefault(q, 'bare_orders'), DEFAULT);
	await ds.query('DROP TABLE bare_orders');
	// public comes before snowflake: a function of that name there is
	// what the default calls
	await ds.query('CREATE FUNCTION public.snowflake_nextval() RETURNS bigint LANGUAGE sql AS $$SELECT 42::bigint$$');
	try {
		await ds.synchronize();
		assert.deepEqual(await plan(ds), []);
		assert.equal(await columnDefault(q, 'bare_orders'), 'snowflake_nextval()', 'public\'s, visible to the application');
		const saved = await ds.getRepository(T).save({ item: 'x' });
		assert.equal(saved.id, '42');
	} finally {
		await ds.query('DROP TABLE bare_orders');
		await ds.query('DROP FUNCTION public.snowflake_nextval()');
	}
});

test('@PrimaryGeneratedColumn cannot be used: synchronize takes a snowflake default away', async () => {
	// @PrimaryGeneratedColumn('increment' | 'identity', { type: 'bigint' })
	for (const strategy of ['increment', 'identity']) {
		const table = `gen_${strategy}`;
		const C = { [table]: class {} }[table];
		Entity(table)(C);
		PrimaryGeneratedColumn(strategy, { type: 'bigint' })(C.prototype, 'id');
		Column('text')(C.prototype, 'item');
		const ds = await open([C]);
		await ds.synchronize();
		if (strategy === 'increment')
			assert.equal(await columnDefault(q, table), `nextval('${table}_id_seq'::regclass)`, 'a sequence, not the extension');
		else
			assert.deepEqual(await q(`SELECT column_default, is_identity FROM information_schema.columns
				WHERE table_name = $1 AND column_name = 'id'`, [table]), [{ column_default: null, is_identity: 'YES' }],
			'an identity, not the extension');
		await q(`SELECT snowflake.snowflake_convert_column('${table}', 'id')`);
		assert.equal(await columnDefault(q, table), DEFAULT);
		assert.ok((await plan(ds)).includes(`ALTER TABLE "${table}" ALTER COLUMN "id" DROP DEFAULT`));
		await ds.synchronize();
		assert.equal(await columnDefault(q, table), null, `${strategy}: the key has no default left`);
		if (strategy === 'increment') {
			await ds.synchronize();
			assert.equal(await columnDefault(q, table), `nextval('${table}_id_seq'::regclass)`, 'and then the sequence again');
		}
	}
});
