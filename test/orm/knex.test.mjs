// Knex with snowflake keys, as README's "Knex" says: a migration declares
// the key, inserts return it.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import knexFactory from 'knex';
import { conn, APP_SEARCH_PATH, assertExactKey, columnDefault } from './common.mjs';

const DEFAULT = 'snowflake.snowflake_nextval()';

const knex = knexFactory({ client: 'pg', connection: conn });
const q = async (sql, params) => (await knex.raw(sql.replace(/\$\d+/g, '?'), params)).rows;

// README's migration
const migration = {
	up: async (knex) => {
		await knex.schema.createTable('orders', (t) => {
			t.bigInteger('id').primary().defaultTo(knex.raw('snowflake.snowflake_nextval()'));
			t.text('item');
		});
		await knex.schema.createTable('order_lines', (t) => {
			t.bigInteger('id').primary().defaultTo(knex.raw('snowflake.snowflake_nextval()'));
			t.bigInteger('order_id').notNullable().references('orders.id');
			t.text('name');
		});
	},
	down: async (knex) => {
		await knex.schema.dropTable('order_lines');
		await knex.schema.dropTable('orders');
	},
};
const migrationSource = {
	getMigrations: async () => ['001_orders'],
	getMigrationName: (name) => name,
	getMigration: async () => migration,
};

after(() => knex.destroy());

test('the application\'s sessions run with README\'s search_path, without snowflake', async () => {
	const [{ search_path }] = await q('SHOW search_path');
	assert.equal(search_path, APP_SEARCH_PATH);
});

test('the migration declares the key; run again, it has nothing to do', async () => {
	const [, first] = await knex.migrate.latest({ migrationSource });
	assert.deepEqual(first, ['001_orders']);
	assert.equal(await columnDefault(q, 'orders'), DEFAULT);
	assert.equal(await columnDefault(q, 'order_lines'), DEFAULT);
	const [, again] = await knex.migrate.latest({ migrationSource });
	assert.deepEqual(again, []);
	assert.equal(await columnDefault(q, 'orders'), DEFAULT);
});

test('insert().returning(\'id\') gives the key exactly, as a string', async () => {
	const [{ id }] = await knex('orders').insert({ item: 'book' }).returning('id');
	await assertExactKey(q, id, 'orders');
	const row = await knex('orders').where({ id }).first();
	assert.deepEqual(row, { id, item: 'book' });
	const many = await knex('orders').insert([{ item: 'pen' }, { item: 'ink' }]).returning('id');
	assert.equal(many.length, 2);
	assert.notEqual(many[0].id, many[1].id);
	for (const r of many)
		await assertExactKey(q, r.id, 'orders');
});

test('README\'s block recipe: parents keyed from one block, children naming them, one transaction', async () => {
	let first;
	await knex.transaction(async (trx) => {
		({ rows: [{ first }] } = await trx.raw('SELECT snowflake.snowflake_nextval_block(?) AS first', [2]));
		const id = (i) => (BigInt(first) + BigInt(i)).toString();
		await trx('orders').insert([{ id: id(0), item: 'order A' }, { id: id(1), item: 'order B' }]);
		await trx('order_lines').insert([
			{ order_id: id(0), name: 'line 1' }, { order_id: id(0), name: 'line 2' }, { order_id: id(1), name: 'line 1' },
		]);
	});
	assert.equal(typeof first, 'string');
	const second = (BigInt(first) + 1n).toString();
	await assertExactKey(q, first, 'orders');
	await assertExactKey(q, second, 'orders');
	const lines = await knex('order_lines as l').join('orders as o', 'o.id', 'l.order_id')
		.select('l.id', 'l.order_id', 'o.item', 'l.name').orderBy('l.id');
	assert.deepEqual(lines.map((l) => [l.order_id, l.item, l.name]),
		[[first, 'order A', 'line 1'], [first, 'order A', 'line 2'], [second, 'order B', 'line 1']]);
	for (const l of lines) {
		await assertExactKey(q, l.id, 'order_lines');
		assert.ok(BigInt(l.id) > BigInt(second), 'a child\'s own key comes after the block');
	}
});

test('increments() and bigIncrements() cannot be used: they make a sequence', async () => {
	await knex.schema.createTable('gen', (t) => {
		t.increments('id');
	});
	await knex.schema.createTable('gen_big', (t) => {
		t.bigIncrements('id');
	});
	assert.equal(await columnDefault(q, 'gen'), 'nextval(\'gen_id_seq\'::regclass)');
	assert.equal(await columnDefault(q, 'gen_big'), 'nextval(\'gen_big_id_seq\'::regclass)');
});
