// ID libraries and the layout that reads each, as the table of
// docs/layouts.md has them: for each library from npm, 300 IDs it makes
// (times across the layout's life, several workers and sequence numbers)
// decode under the layout to what they were made with, and 300 IDs the
// extension makes (snowflake_from_timestamp()) are the library's own IDs
// of those times and decode in the library to them.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { DiscordSnowflake, TwitterSnowflake } from '@sapphire/snowflake';
import nodejsSnowflake from 'nodejs-snowflake';
import { Sonyflake } from 'sonyflake';
import { conn } from './common.mjs';

const { Snowflake: NodejsSnowflake } = nodejsSnowflake;
const pool = new pg.Pool(conn);
after(() => pool.end());

const N = 300;

// the layout of each library, as the table of docs/layouts.md
// (SNOWFLAKE_DOCS, which test/orm/run.sh sets) names it
const LAYOUTS = {
	'`@sapphire/snowflake` 3.5, `DiscordSnowflake`': 'discord',
	'`@sapphire/snowflake` 3.5, `TwitterSnowflake`': 'twitter',
	'`nodejs-snowflake` 2.0, `custom_epoch: Date.UTC(2020, 0, 1)`': 'custom:42/12/10/1ms/2020-01-01',
	'`sonyflake` 1.1, `epoch: Date.UTC(2020, 0, 1)`': 'custom:39/16/8/1ms/2020-01-01/seq_above_worker',
};

test('docs/layouts.md names the layouts these tests read each library with', () => {
	const doc = readFileSync(`${process.env.SNOWFLAKE_DOCS}/layouts.md`, 'utf8');
	const rows = Object.fromEntries(doc.split('\n').filter((l) => /^\| .* \| npm \| /.test(l))
		.map((l) => l.split(' | ')).map(([lib, , layout]) => [lib.slice(2), layout.replace(/`/g, '')]));
	assert.deepEqual(rows, LAYOUTS);
});
const EPOCH_2020 = Date.UTC(2020, 0, 1);

// N times (Unix ms, as BigInt) from just after epoch to just before end
function times(epoch, end) {
	const span = BigInt(end) - BigInt(epoch) - 2n;
	return Array.from({ length: N }, (_, i) => BigInt(epoch) + 1n + (span * BigInt(i)) / BigInt(N - 1) -
		(i === N - 1 ? 1n : 0n) + BigInt((i * 7919) % 997) * (i > 0 && i < N - 1 ? 1n : 0n));
}

// the extension's reading of ids under layout: [ms, worker, seq] as BigInt
async function decode(ids, layout) {
	const { rows } = await pool.query(`SELECT (extract(epoch FROM d.ts) * 1000)::bigint::text AS ms, d.worker_id AS worker, d.seq
		FROM unnest($1::bigint[]) WITH ORDINALITY u(id, n), snowflake.snowflake_decode(u.id, $2) d ORDER BY u.n`,
	[ids.map(String), layout]);
	return rows.map((r) => [BigInt(r.ms), BigInt(r.worker), BigInt(r.seq)]);
}

// the extension's IDs of times (worker 0, sequence 0), as BigInt
async function fromTimestamps(ts, layout) {
	const { rows } = await pool.query(`SELECT snowflake.snowflake_from_timestamp(timestamptz 'epoch' + t * interval '1 ms', $2)::text AS id
		FROM unnest($1::bigint[]) WITH ORDINALITY u(t, n) ORDER BY u.n`, [ts.map(String), layout]);
	return rows.map((r) => BigInt(r.id));
}

// made: [{ id, ms, worker, seq }] of the library; both ways under layout
async function bothWays(layout, made, ts, libraryId, libraryDecode) {
	assert.equal(made.length, N);
	assert.deepEqual(await decode(made.map((m) => m.id), layout), made.map((m) => [m.ms, m.worker, m.seq]),
		`the library's IDs decode under ${layout} to what they were made with`);
	const ours = await fromTimestamps(ts, layout);
	assert.deepEqual(ours, ts.map((t) => libraryId(t)), `snowflake_from_timestamp(t, '${layout}') is the library's ID of t`);
	assert.deepEqual(ours.map(libraryDecode), ts.map((t) => [t, 0n, 0n]), 'and decodes in the library to t');
}

// the end of a layout's positive IDs, in Unix ms
async function endOf(layout) {
	const { rows: [{ ms }] } = await pool.query(`SELECT (extract(epoch FROM
		snowflake.snowflake_timestamp(9223372036854775807, $1)) * 1000)::bigint::text AS ms`, [layout]);
	return BigInt(ms);
}

for (const [name, lib, layout] of [['@sapphire/snowflake DiscordSnowflake', DiscordSnowflake, LAYOUTS['`@sapphire/snowflake` 3.5, `DiscordSnowflake`']],
	['@sapphire/snowflake TwitterSnowflake', TwitterSnowflake, LAYOUTS['`@sapphire/snowflake` 3.5, `TwitterSnowflake`']]]) {
	test(`${name}: the ${layout} preset, both ways`, async () => {
		const ts = times(lib.epoch, await endOf(layout));
		const made = ts.map((t, i) => {
			const [w, p, s] = [BigInt(i % 32), BigInt((i * 7) % 32), BigInt((i * 101) % 4096)];
			return { id: lib.generate({ timestamp: t, workerId: w, processId: p, increment: s }), ms: t, worker: (w << 5n) | p, seq: s };
		});
		await bothWays(layout, made, ts, (t) => lib.generate({ timestamp: t, workerId: 0n, processId: 0n, increment: 0n }),
			(id) => { const d = lib.deconstruct(id); return [d.timestamp, (d.workerId << 5n) | d.processId, d.increment]; });
	});
}

test('nodejs-snowflake 2.0 with custom_epoch 2020-01-01: custom:42/12/10/1ms/2020-01-01, both ways', async () => {
	const layout = LAYOUTS['`nodejs-snowflake` 2.0, `custom_epoch: Date.UTC(2020, 0, 1)`'];
	const ts = times(EPOCH_2020, await endOf(layout));
	const made = [];
	// idFromTimestamp: three instances; getUniqueID: consecutive sequence numbers now
	for (const instance of [0, 7, 4095]) {
		const gen = new NodejsSnowflake({ custom_epoch: EPOCH_2020, instance_id: instance });
		for (const t of ts.slice(0, 90))
			made.push({ id: BigInt(gen.idFromTimestamp(Number(t))), ms: t, worker: BigInt(instance), seq: 0n });
		for (let i = 0; i < 10; i++) {
			const id = BigInt(gen.getUniqueID());
			made.push({ id, ms: BigInt(NodejsSnowflake.timestampFromID(id, EPOCH_2020)), worker: BigInt(instance), seq: id & 1023n });
		}
	}
	const zero = new NodejsSnowflake({ custom_epoch: EPOCH_2020, instance_id: 0 });
	await bothWays(layout, made, ts, (t) => BigInt(zero.idFromTimestamp(Number(t))),
		(id) => [BigInt(NodejsSnowflake.timestampFromID(id, EPOCH_2020)), BigInt(NodejsSnowflake.instanceIDFromID(id)), id & 1023n]);
	assert.equal(new NodejsSnowflake({ instance_id: 1 }).customEpoch() > EPOCH_2020, true,
		'without custom_epoch the epoch is the moment the generator was made: name it');
});

test('npm sonyflake 1.1 with epoch 2020-01-01: custom:39/16/8/1ms/2020-01-01/seq_above_worker, both ways; the sonyflake preset misreads it', async () => {
	const layout = LAYOUTS['`sonyflake` 1.1, `epoch: Date.UTC(2020, 0, 1)`'];
	const ts = times(EPOCH_2020, await endOf(layout));
	const made = [];
	for (const machineId of [0, 7, 65535]) {
		const gen = new Sonyflake({ epoch: EPOCH_2020, machineId });
		ts.slice(0, 100).forEach((t, i) => {
			const seq = (i * 37) % 256;
			made.push({ id: BigInt(gen.generateCustomId({ timestamp: Number(t), sequence: seq })), ms: t, worker: BigInt(machineId), seq: BigInt(seq) });
		});
	}
	const zero = new Sonyflake({ epoch: EPOCH_2020, machineId: 0 });
	await bothWays(layout, made, ts, (t) => BigInt(zero.generateCustomId({ timestamp: Number(t), sequence: 0 })),
		(id) => { const d = zero.decompose(String(id)); return [BigInt(d.timestamp), BigInt(d.machineId), BigInt(d.sequence)]; });
	// sony/sonyflake's Go format counts 10 ms from 2014-09-01
	const now = made.filter((m) => m.ms > BigInt(Date.UTC(2025, 0, 1)) && m.ms < BigInt(Date.UTC(2030, 0, 1)));
	const preset = await decode(now.map((m) => m.id), 'sonyflake');
	assert.ok(now.length > 0 && preset.every(([ms], i) => ms !== now[i].ms), 'the sonyflake preset reads other times');
});

test('npm sonyflake 1.1 repeats its IDs past 256 in one millisecond: its sequence wraps, it does not wait', () => {
	const realNow = Date.now;
	const held = realNow();
	Date.now = () => held;
	try {
		const gen = new Sonyflake({ epoch: EPOCH_2020, machineId: 7 });
		const ids = Array.from({ length: 257 }, () => gen.nextId());
		assert.equal(new Set(ids.slice(0, 256)).size, 256);
		assert.equal(ids[256], ids[0], 'the 257th ID of the millisecond is the first one again');
	} finally {
		Date.now = realNow;
	}
});
