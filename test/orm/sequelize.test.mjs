// Sequelize with snowflake keys, as README's "Sequelize" says.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { Sequelize, DataTypes, QueryTypes } from 'sequelize';
import { conn, APP_SEARCH_PATH, assertExactKey, columnDefault } from './common.mjs';

const DEFAULT = 'snowflake.snowflake_nextval()';

let statements = [];
const sequelize = new Sequelize({
	dialect: 'postgres', host: conn.host, port: conn.port, username: conn.user, database: conn.database,
	logging: (sql) => statements.push(sql),
});
const q = (sql, bind) => sequelize.query(sql, { bind, type: QueryTypes.SELECT });

const key = { type: DataTypes.BIGINT, primaryKey: true, defaultValue: Sequelize.literal(DEFAULT) };
const Order = sequelize.define('Order', {
	id: key,
	item: DataTypes.TEXT,
}, { tableName: 'orders', timestamps: false });
const OrderLine = sequelize.define('OrderLine', {
	id: key,
	name: DataTypes.TEXT,
}, { tableName: 'order_lines', timestamps: false });
OrderLine.belongsTo(Order, { foreignKey: { name: 'orderId', field: 'order_id', allowNull: false } });

after(() => sequelize.close());

test('the application\'s sessions run with README\'s search_path, without snowflake', async () => {
	const [{ search_path }] = await q('SHOW search_path');
	assert.equal(search_path, APP_SEARCH_PATH);
});

test('sync() makes the tables; sync({ alter: true }) twice leaves the key\'s default as declared', async () => {
	await sequelize.sync();
	assert.equal(await columnDefault(q, 'orders'), DEFAULT);
	assert.equal(await columnDefault(q, 'order_lines'), DEFAULT);
	for (let run = 1; run <= 2; run++) {
		statements = [];
		await sequelize.sync({ alter: true });
		const alters = statements.filter((s) => /ALTER TABLE/.test(s));
		assert.ok(!alters.some((s) => /ALTER COLUMN "id"/.test(s)), `run ${run} leaves the key alone:\n${alters.join('\n')}`);
		// it compares nothing: every other column is altered on every run
		assert.ok(alters.some((s) => /ALTER TABLE "orders" ALTER COLUMN "item" DROP NOT NULL;.*ALTER COLUMN "item" TYPE TEXT/.test(s)),
			`run ${run} alters "item" again:\n${alters.join('\n')}`);
		assert.equal(await columnDefault(q, 'orders'), DEFAULT);
		assert.equal(await columnDefault(q, 'order_lines'), DEFAULT);
	}
});

test('create() and bulkCreate() take the key from the default and read it back exactly, as a string', async () => {
	statements = [];
	const one = await Order.create({ item: 'book' });
	assert.match(statements.join('\n'), /INSERT INTO "orders" \("id","item"\) VALUES \(snowflake\.snowflake_nextval\(\),\$1\) RETURNING "id","item"/);
	await assertExactKey(q, one.id, 'orders');
	const found = await Order.findByPk(one.id);
	assert.equal(found.id, one.id);
	assert.equal(found.item, 'book');
	const many = await Order.bulkCreate([{ item: 'pen' }, { item: 'ink' }]);
	assert.equal(new Set(many.map((o) => o.id)).size, 2);
	for (const o of many)
		await assertExactKey(q, o.id, 'orders');
});

test('README\'s block recipe: parents keyed from one block, children naming them, one transaction', async () => {
	let first;
	await sequelize.transaction(async (transaction) => {
		[{ first }] = await sequelize.query('SELECT snowflake.snowflake_nextval_block(?) AS first',
			{ replacements: [2], type: QueryTypes.SELECT, transaction });
		const id = (i) => (BigInt(first) + BigInt(i)).toString();
		await Order.bulkCreate([{ id: id(0), item: 'order A' }, { id: id(1), item: 'order B' }], { transaction });
		await OrderLine.bulkCreate([
			{ orderId: id(0), name: 'line 1' }, { orderId: id(0), name: 'line 2' }, { orderId: id(1), name: 'line 1' },
		], { transaction });
	});
	assert.equal(typeof first, 'string');
	const second = (BigInt(first) + 1n).toString();
	await assertExactKey(q, first, 'orders');
	await assertExactKey(q, second, 'orders');
	const lines = await OrderLine.findAll({ include: Order, order: [['id', 'ASC']] });
	assert.deepEqual(lines.map((l) => [l.orderId, l.Order.id, l.Order.item, l.name]),
		[[first, first, 'order A', 'line 1'], [first, first, 'order A', 'line 2'], [second, second, 'order B', 'line 1']]);
	for (const l of lines) {
		await assertExactKey(q, l.id, 'order_lines');
		assert.ok(BigInt(l.id) > BigInt(second), 'a child\'s own key comes after the block');
	}
});

test('autoIncrement cannot be used: a sequence, or with the default no table at all', async () => {
	const Gen = sequelize.define('Gen', { id: { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true }, item: DataTypes.TEXT },
		{ tableName: 'gen', timestamps: false });
	await Gen.sync();
	assert.equal(await columnDefault(q, 'gen'), 'nextval(\'gen_id_seq\'::regclass)', 'BIGSERIAL: a sequence, not the extension');
	const Both = sequelize.define('Both', { id: { ...key, autoIncrement: true }, item: DataTypes.TEXT },
		{ tableName: 'gen_both', timestamps: false });
	await assert.rejects(Both.sync(), /multiple default values specified for column "id" of table "gen_both"/);
});
