# docs/text-ids.md's Rails recipe with Debian's Active Record: a model
# whose serializable_hash sends its generated text column as the key sends
# IDs as strings that JSON.parse keeps; a string finds its row through the
# reader, also in upper case or with O for 0, and one that is no ID is not
# found; ordered by the column, declared COLLATE "C", rows come in the IDs'
# order in a database whose collation would not keep it (test/text/run.sh
# makes it Czech where the server has ICU); the plain model's to_json
# writes a number, which a browser rounds.  Connects with libpq's variables
# (test/text/run.sh sets them).  Prints TAP: "ok N - name", "# pass N",
# "# fail N".
require 'active_record'
require 'json'

ActiveRecord::Base.establish_connection(adapter: 'postgresql', host: ENV['PGHOST'], port: ENV['PGPORT'],
                                        username: ENV['PGUSER'], database: ENV['PGDATABASE'])
ActiveRecord::Base.connection.execute(<<~SQL)
  CREATE TABLE orders (
    id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(),
    public_id text COLLATE "C" GENERATED ALWAYS AS (snowflake.snowflake_base32(id, 'order')) STORED UNIQUE,
    item text)
SQL

class ApplicationRecord < ActiveRecord::Base
  self.abstract_class = true
end

class Order < ApplicationRecord
  def serializable_hash(options = nil)
    super({ except: :id }.merge(options || {})).merge('id' => public_id)
  end

  # the row of a public ID in any form the reader takes (upper case, O for
  # 0); a string that is no order's ID (22P02, 22003) is not found
  def self.find_public!(public_id)
    where('id = snowflake.snowflake_from_base32(?, ?)', public_id, 'order').take!
  rescue ActiveRecord::StatementInvalid => e
    raise unless e.cause.is_a?(PG::InvalidTextRepresentation) || e.cause.is_a?(PG::NumericValueOutOfRange)
    raise ActiveRecord::RecordNotFound
  end
end

class PlainOrder < ApplicationRecord
  self.table_name = 'orders'
end

%w[book pen ink].each { |item| Order.create!(item: item) }
HELD = ActiveRecord::Base.connection.select_rows('SELECT id::text, public_id, item FROM orders ORDER BY id')

# what a browser's JSON.parse keeps: integers above 2^53 become doubles
def browser(json)
  JSON.parse(json, decimal_class: nil).tap do |v|
    walk = lambda do |x|
      case x
      when Array then x.map!(&walk)
      when Hash then x.transform_values!(&walk)
      when Integer then x.abs > 2**53 ? x.to_f : x
      else x
      end
    end
    walk.call(v)
  end
end

$n = $pass = $fail = 0
def check(name)
  $n += 1
  ok = begin
    yield
  rescue StandardError => e
    puts "# #{e.class}: #{e.message}"
    false
  end
  if ok
    $pass += 1
    puts "ok #{$n} - #{name}"
  else
    $fail += 1
    puts "not ok #{$n} - #{name}"
  end
end

check('the recipe: to_json sends the text form as the key, a string, exact') do
  sent = browser(Order.order(:id).to_json)
  sent.map { |o| [o['id'], o['item']] } == HELD.map { |_, public_id, item| [public_id, item] } &&
    sent.all? { |o| o['id'].is_a?(String) && o['id'].start_with?('order_') }
end

check('the recipe: a string finds its row through the reader') do
  HELD.all? { |id, public_id, item| (o = Order.find_public!(public_id)).item == item && o.id.to_s == id }
end

check('so do its upper case and O for 0, where the column compared as text finds nothing') do
  HELD.all? do |_, public_id, item|
    variant = 'order_' + public_id.delete_prefix('order_').upcase.tr('0', 'O')
    Order.find_public!(variant).item == item && Order.find_by(public_id: variant).nil?
  end
end

check('a string that is no ID is not found') do
  ['order_0000-0000-0001', 'order_8000000000000', 'user_' + HELD[0][1].delete_prefix('order_'), 'nonsense'].all? do |s|
    Order.find_public!(s)
    false
  rescue ActiveRecord::RecordNotFound
    true
  end
end

check('the plain model writes the key as a JSON number, which a browser rounds') do
  sent = browser(PlainOrder.order(:id).to_json)
  sent.all? { |o| o['id'].is_a?(Float) } && sent.zip(HELD).any? { |o, (id, _, _)| o['id'].to_i.to_s != id }
end

# 12832 is 0000000000ch0 and 13312 is 0000000000d00: in Czech "ch" sorts
# after "h"
broken = ActiveRecord::Base.connection.select_value(
  'SELECT (snowflake.snowflake_base32(12832) > snowflake.snowflake_base32(13312))::int').to_i
puts "# this database's default collation #{broken == 1 ? 'breaks' : 'keeps'} the order of base32"
check("ordered by the column, declared COLLATE \"C\", rows come in the IDs' order") do
  Order.create!(id: 13312, item: 'd')
  Order.create!(id: 12832, item: 'ch')
  Order.order(:public_id).pluck(:id) == Order.order(:id).pluck(:id)
end

puts "1..#{$n}"
puts "# pass #{$pass}"
puts "# fail #{$fail}"
