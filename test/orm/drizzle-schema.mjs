// docs/orms.md's Drizzle schema: keys from the extension's default, read as
// bigint (mode: 'number' would round them).
import { pgTable, bigint, text } from 'drizzle-orm/pg-core';
import { sql } from 'drizzle-orm';

const snowflakeKey = () => bigint('id', { mode: 'bigint' }).primaryKey().default(sql`snowflake.snowflake_nextval()`);

export const orders = pgTable('orders', {
	id: snowflakeKey(),
	item: text('item').notNull(),
});

export const orderLines = pgTable('order_lines', {
	id: snowflakeKey(),
	orderId: bigint('order_id', { mode: 'bigint' }).notNull().references(() => orders.id),
	name: text('name').notNull(),
});
