# Rails 6.1 (Debian's) with snowflake keys, as docs/orms.md's "Rails" says,
# its blocks taken from there as pasted: the superuser's SQL (run with
# psql), config/database.yml and the migration written into the
# application rails_shop (Active Record only), and its tasks run as the
# role shop, below superuser: db:create db:migrate, db:schema:load,
# db:test:prepare and db:drop db:create db:schema:load, with schema.rb and
# with structure.sql, neither holding the extension's tables; keys from
# the default through create! and insert_all, and the block recipe, run
# with bin/rails runner.  And what the section says not to do fails as it
# says: snowflake in schema_search_path, a database made from template1.
# Connects with libpq's variables (test/orm/run.sh sets them; the
# superuser is postgres); PSQL names psql.  Prints TAP: "ok N - name" per
# test, then "# pass N", "# fail N".
require "fileutils"
require "json"
require "open3"
require "pg"
require "rbconfig"

APP = File.join(__dir__, "rails_shop")
PSQL = ENV.fetch("PSQL", "psql")
SECTION = File.read(File.join(ENV.fetch("SNOWFLAKE_DOCS"), "orms.md"))[/^## Rails\n(.*?)(?=^## |\z)/m, 1] or
  abort "docs/orms.md has no section Rails"

# the block of docs/orms.md's Rails in LANG that holds MARKER
def doc_block(lang, marker)
  SECTION.scan(/^```#{lang}\n(.*?)^```$/m).flatten.find { |b| b.include?(marker) } or
    raise "docs/orms.md's Rails has no #{lang} block with #{marker}"
end

$n = $passed = $failed = 0
def test(name)
  $n += 1
  yield
  $passed += 1
  puts "ok #{$n} - #{name}"
rescue StandardError => e
  $failed += 1
  puts "not ok #{$n} - #{name}"
  puts (["#{e.class}: #{e.message}"] + e.backtrace.first(3)).join("\n").gsub(/^/, "# ")
end

def check(ok, what)
  raise what unless ok
end

# bin/rails ARGS in the application, as the role of database.yml; its
# output and whether it succeeded
def rails(*args, env: {})
  out, status = Open3.capture2e(env, RbConfig.ruby, "bin/rails", *args, chdir: APP)
  [out, status.success?]
end

def rails!(*args, env: {})
  out, ok = rails(*args, env: env)
  check(ok, "bin/rails #{args.join(' ')} failed:\n#{out}")
  out
end

# QUERY as the superuser, in the application's search_path (without
# snowflake: defaults read as the application's sessions see them)
def sql(db, query, params = [])
  c = PG.connect(user: "postgres", dbname: db, options: "-c search_path=public")
  c.exec_params(query, params).values
ensure
  c&.close
end

def key_default(db, table)
  sql(db, "SELECT column_default FROM information_schema.columns
    WHERE table_schema = 'public' AND table_name = $1 AND column_name = 'id'", [table]).dig(0, 0)
end

# a key of this node: an Integer above 2^53, held by the table, worker 7
def snowflake_key(db, key, table)
  check(key.is_a?(Integer) && key > 2**53, "#{key.inspect} is not a snowflake ID")
  check(sql(db, "SELECT count(*) FROM #{table} WHERE id = $1", [key]) == [["1"]], "no row #{key} in #{table}")
  check(sql(db, "SELECT worker_id FROM snowflake.snowflake_decode($1)", [key]) == [["7"]], "#{key} is not worker 7's")
end

DEFAULT = "snowflake.snowflake_nextval()"
KEY_LINE = 'create_table "orders", id: :bigint, default: -> { "snowflake.snowflake_nextval()" }'

test "the superuser's SQL: the role shop, the template database with the extension" do
  File.write(File.join(APP, "setup.sql"), doc_block("sql", "snowflake_template"))
  out, status = Open3.capture2e(PSQL, "-X", "-q", "-v", "ON_ERROR_STOP=1", "-U", "postgres", "-d", "postgres",
                                "-f", File.join(APP, "setup.sql"))
  check(status.success?, out)
  check(sql("postgres", "SELECT rolsuper, rolcreatedb FROM pg_roles WHERE rolname = 'shop'") == [%w[f t]],
        "shop is not a role with CREATEDB below superuser")
end

test "db:create db:migrate as shop, with database.yml and the migration of docs/orms.md" do
  File.write(File.join(APP, "config", "database.yml"), doc_block("yaml", "template: snowflake_template"))
  FileUtils.mkdir_p(File.join(APP, "db", "migrate"))
  File.write(File.join(APP, "db", "migrate", "20261101000000_create_orders.rb"),
             doc_block("ruby", "ActiveRecord::Migration"))
  rails!("db:create", "db:migrate")
  %w[shop_development shop_test].each do |db|
    check(sql(db, "SELECT datdba::regrole::text FROM pg_database WHERE datname = $1", [db]) == [["shop"]],
          "#{db} is not shop's")
  end
  check(key_default("shop_development", "orders") == DEFAULT, "orders.id: #{key_default('shop_development', 'orders')}")
  check(key_default("shop_development", "order_lines") == DEFAULT, "order_lines.id has another default")
end

test "schema.rb: the keys' default, no table of the extension" do
  schema = File.read(File.join(APP, "db", "schema.rb"))
  check(schema.include?(KEY_LINE), schema)
  check(!schema.include?("snowflake_workers") && !schema.include?("snowflake_mesh_changes"), schema)
end

test "db:schema:load and db:test:prepare as shop" do
  rails!("db:schema:load", "db:test:prepare")
  %w[shop_development shop_test].each do |db|
    check(key_default(db, "orders") == DEFAULT, "#{db}: orders.id: #{key_default(db, 'orders')}")
  end
end

test "create!, insert_all and the block recipe: keys from the default, exact, as Integers" do
  File.write(File.join(APP, "keys.rb"), <<~RUBY)
    one = Order.create!(item: 'book')
    many = Order.insert_all([{ item: 'pen' }, { item: 'ink' }], returning: :id).rows.flatten
    line = OrderLine.create!(order: one, name: 'line 1')
    #{doc_block('ruby', 'snowflake_nextval_block')}
    a, b = Order.find_by!(item: 'order A'), Order.find_by!(item: 'order B')
    lines = OrderLine.where(order: [a, b]).order(:id).map { |l| [l.id, l.order_id, l.name] }
    puts({ one: one.id, many: many, line: line.id, a: a.id, b: b.id, lines: lines }.to_json)
  RUBY
  out = rails!("runner", "keys.rb")
  keys = JSON.parse(out.lines.last)
  ([keys["one"], keys["a"], keys["b"]] + keys["many"]).each { |k| snowflake_key("shop_development", k, "orders") }
  snowflake_key("shop_development", keys["line"], "order_lines")
  check(keys["b"] == keys["a"] + 1, "the block's keys #{keys['a']}, #{keys['b']}")
  check(keys["lines"].map { |l| l[1..] } == [[keys["a"], "line 1"], [keys["a"], "line 2"], [keys["b"], "line 1"]],
        keys["lines"].inspect)
  keys["lines"].each { |l| snowflake_key("shop_development", l[0], "order_lines") }
end

test "db:drop db:create db:schema:load as shop" do
  rails!("db:drop", "db:create", "db:schema:load")
  check(key_default("shop_development", "orders") == DEFAULT, "orders.id has another default")
end

test "structure.sql, with docs/orms.md's lines: the keys' default, not the extension's schema; loaded as shop" do
  File.write(File.join(APP, "config", "structure_sql.rb"), doc_block("ruby", "structure_dump_flags"))
  sqlformat = { "SCHEMA_FORMAT" => "sql" }
  rails!("db:schema:dump", env: sqlformat)
  structure = File.read(File.join(APP, "db", "structure.sql"))
  check(structure.include?("id bigint DEFAULT snowflake.snowflake_nextval() NOT NULL"), structure)
  check(!structure.include?("snowflake_workers") && !structure.include?("CREATE SCHEMA"), structure)
  check(structure.include?("CREATE EXTENSION IF NOT EXISTS snowflake WITH SCHEMA snowflake;"), structure)
  rails!("db:drop", "db:create", "db:schema:load", "db:test:prepare", env: sqlformat)
  %w[shop_development shop_test].each do |db|
    check(key_default(db, "orders") == DEFAULT, "#{db}: orders.id: #{key_default(db, 'orders')}")
  end
end

test "not snowflake in schema_search_path: the dump has the extension's tables, and loading it fails" do
  url = { "DATABASE_URL" => "postgresql:///shop_development?schema_search_path=public,snowflake",
          "SCHEMA" => File.join(APP, "db", "wrong_schema.rb") }
  rails!("db:schema:dump", env: url)
  wrong = File.read(url["SCHEMA"])
  check(wrong.include?('create_table "snowflake_workers"'), wrong)
  out, ok = rails("db:schema:load", env: url)
  check(!ok && out.include?("PG::InsufficientPrivilege"), "db:schema:load: #{ok}\n#{out}")
end

test "not a database made from template1: db:schema:load stops at enable_extension" do
  sql("postgres", "CREATE DATABASE shop_plain OWNER shop TEMPLATE template1")
  out, ok = rails("db:schema:load", env: { "DATABASE_URL" => "postgresql:///shop_plain" })
  check(!ok && out.include?("PG::InsufficientPrivilege"), "db:schema:load: #{ok}\n#{out}")
  check(sql("shop_plain", "SELECT count(*) FROM pg_class WHERE relname = 'orders'") == [["0"]], "orders made")
end

puts "1..#{$n}"
puts "# pass #{$passed}"
puts "# fail #{$failed}"
