// MikroORM with snowflake keys, as docs/orms.md's "MikroORM" says.  The
// entities are its TypeScript, with each decorator applied as
// TypeScript's compiler applies it (Entity(...)(Order) for @Entity(...)).  MikroORM takes
// any key whose default's text holds "nextval" for a serial, so the
// default is snowflake_next_id(), snowflake_nextval() by another name.
import 'reflect-metadata';
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { MikroORM, Entity, PrimaryKey, Property, ManyToOne } from '@mikro-orm/postgresql';
import { conn, APP_SEARCH_PATH, assertExactKey, columnDefault } from './common.mjs';

const DEFAULT = 'snowflake.snowflake_next_id()';

// @PrimaryKey({ type: 'bigint', autoincrement: false, defaultRaw: declared }) id!: bigint;
function key(C, declared = DEFAULT) {
	PrimaryKey({ type: 'bigint', autoincrement: false, defaultRaw: declared })(C.prototype, 'id');
}

// @Entity({ tableName: 'orders' }) class Order { id; @Property({ type: 'text' }) item!: string; }
class Order {}
Entity({ tableName: 'orders' })(Order);
key(Order);
Property({ type: 'text' })(Order.prototype, 'item');
// @Entity({ tableName: 'order_lines' }) class OrderLine { id;
//   @ManyToOne(() => Order, { fieldName: 'order_id' }) order!: Order; @Property(...) name!: string; }
class OrderLine {}
Entity({ tableName: 'order_lines' })(OrderLine);
key(OrderLine);
ManyToOne(() => Order, { fieldName: 'order_id' })(OrderLine.prototype, 'order');
Property({ type: 'text' })(OrderLine.prototype, 'name');

const orms = [];
async function open(entities, options = {}) {
	const orm = await MikroORM.init({
		entities, dbName: conn.database, host: conn.host, port: conn.port, user: conn.user,
		allowGlobalContext: true, ...options,
	});
	orms.push(orm);
	return orm;
}
// what schema:update would run now
async function plan(orm) {
	return (await orm.getSchemaGenerator().getUpdateSchemaSQL({ wrap: false })).trim();
}

const app = await open([Order, OrderLine]);
// MikroORM's placeholders are knex's: ? for common.mjs's $1
const q = (sql, params) => app.em.getConnection().execute(sql.replace(/\$\d+/g, '?'), params);

after(async () => {
	for (const orm of orms)
		await orm.close();
});

test('the application\'s sessions run with README\'s search_path, without snowflake', async () => {
	const [{ search_path }] = await q('SHOW search_path');
	assert.equal(search_path, APP_SEARCH_PATH);
});

test('schema:update makes the tables; run again, it plans nothing', async () => {
	const first = await plan(app);
	assert.match(first, /create table "orders" \("id" bigint not null default snowflake\.snowflake_next_id\(\)/);
	await app.getSchemaGenerator().updateSchema();
	assert.equal(await columnDefault(q, 'orders'), DEFAULT);
	assert.equal(await columnDefault(q, 'order_lines'), DEFAULT);
	assert.equal(await plan(app), '');
	await app.getSchemaGenerator().updateSchema();
	assert.equal(await plan(app), '', 'nothing after a second update either');
});

test('flush() takes the key from the default and reads it back exactly, as a bigint', async () => {
	const em = app.em.fork();
	const one = em.create(Order, { item: 'book' });
	const many = [em.create(Order, { item: 'pen' }), em.create(Order, { item: 'ink' })];
	await em.flush();
	const keys = [one, ...many].map((o) => o.id);
	for (const id of keys) {
		assert.equal(typeof id, 'bigint');
		await assertExactKey(q, String(id), 'orders');
	}
	assert.equal(new Set(keys).size, 3);
	const found = await app.em.fork().findOne(Order, { id: one.id });
	assert.equal(found.id, one.id);
	assert.equal(found.item, 'book');
});

test('README\'s block recipe: parents keyed from one block, children naming them, one transaction', async () => {
	let first;
	await app.em.fork().transactional(async (em) => {
		[{ first }] = await em.getConnection().execute('SELECT snowflake.snowflake_nextval_block(?)::text AS first', [2],
			'all', em.getTransactionContext());
		const a = em.create(Order, { id: BigInt(first), item: 'order A' });
		const b = em.create(Order, { id: BigInt(first) + 1n, item: 'order B' });
		em.create(OrderLine, { order: a, name: 'line 1' });
		em.create(OrderLine, { order: a, name: 'line 2' });
		em.create(OrderLine, { order: b, name: 'line 1' });
	});
	const second = (BigInt(first) + 1n).toString();
	await assertExactKey(q, first, 'orders');
	await assertExactKey(q, second, 'orders');
	const lines = await app.em.fork().find(OrderLine, { order: { id: { $in: [BigInt(first), BigInt(second)] } } },
		{ populate: ['order'], orderBy: { id: 'asc' } });
	assert.deepEqual(lines.map((l) => [String(l.order.id), l.order.item, l.name]),
		[[first, 'order A', 'line 1'], [first, 'order A', 'line 2'], [second, 'order B', 'line 1']]);
	for (const l of lines) {
		await assertExactKey(q, String(l.id), 'order_lines');
		assert.ok(l.id > BigInt(second), 'a child\'s own key comes after the block');
	}
});

test('a snowflake_nextval() default is taken for a serial: schema:update changes its type on every run', async () => {
	class NvOrder {}
	Entity({ tableName: 'nv_orders' })(NvOrder);
	key(NvOrder, 'snowflake.snowflake_nextval()');
	Property({ type: 'text' })(NvOrder.prototype, 'item');
	// with the other entities: schema:update drops the tables it does not know
	const orm = await open([Order, OrderLine, NvOrder]);
	await orm.getSchemaGenerator().updateSchema();
	assert.equal(await columnDefault(q, 'nv_orders'), 'snowflake.snowflake_nextval()');
	const phantom = 'alter table "nv_orders" alter column "id" type bigint using ("id"::bigint);';
	assert.equal(await plan(orm), phantom);
	await orm.getSchemaGenerator().updateSchema();
	assert.equal(await plan(orm), phantom, 'and again after it ran');
	await q('DROP TABLE nv_orders');
});

test('a role that sees the extension\'s schema: schema:update drops it unless ignoreSchema names it', async () => {
	// a superuser, with the application's search_path
	const connect = { user: 'postgres', driverOptions: { connection: { options: '-c search_path=public' } } };
	const bare = await open([Order, OrderLine], connect);
	const drops = await plan(bare);
	assert.match(drops, /drop table if exists "snowflake"\."snowflake_workers" cascade;/);
	assert.match(drops, /drop schema if exists "snowflake";/);
	await assert.rejects(bare.getSchemaGenerator().updateSchema(),
		/cannot drop table snowflake\.snowflake_\w+ because extension snowflake requires it/);
	const ignoring = await open([Order, OrderLine], { ...connect, schemaGenerator: { ignoreSchema: ['snowflake'] } });
	assert.equal(await plan(ignoring), '');
	assert.equal(await plan(app), '', 'the application\'s role does not see it at all');
});
