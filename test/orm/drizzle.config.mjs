// drizzle-kit's configuration for docs/orms.md's Drizzle schema; the connection
// is libpq's variables, as test/orm/run.sh sets them.
export default {
	dialect: 'postgresql',
	schema: './drizzle-schema.mjs',
	out: './drizzle',
	dbCredentials: {
		host: process.env.PGHOST,
		port: Number(process.env.PGPORT || 5432),
		user: process.env.PGUSER,
		database: process.env.PGDATABASE,
		ssl: false,
	},
};
