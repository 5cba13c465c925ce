# docs/text-ids.md's Rails recipe with Debian's Active Record: a model
# whose serializable_hash sends its generated text column as the key sends
# IDs as strings that JSON.parse keeps, and a string finds its row; the
# plain model's to_json writes a number, which a browser rounds.  Connects
# with libpq's variables (test/text/run.sh sets them).  Prints TAP: "ok N -
# name", "# pass N", "# fail N".
require 'active_record'
require 'json'

ActiveRecord::Base.establish_connection(adapter: 'postgresql', host: ENV['PGHOST'], port: ENV['PGPORT'],
                                        username: ENV['PGUSER'], database: ENV['PGDATABASE'])
ActiveRecord::Base.connection.execute(<<~SQL)
  CREATE TABLE orders (
    id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(),
    public_id text GENERATED ALWAYS AS (snowflake.snowflake_base32(id, 'order')) STORED UNIQUE,
    item text)
SQL

class ApplicationRecord < ActiveRecord::Base
  self.abstract_class = true
end

class Order < ApplicationRecord
  def serializable_hash(options = nil)
    super({ except: :id }.merge(options || {})).merge('id' => public_id)
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

check('a string finds its row, by the column or read back to the key') do
  HELD.all? do |id, public_id, item|
    Order.find_by!(public_id: public_id).item == item &&
      Order.where('id = snowflake.snowflake_from_base32(?, ?)', public_id, 'order').pick(:id).to_s == id
  end
end

check('the plain model writes the key as a JSON number, which a browser rounds') do
  sent = browser(PlainOrder.order(:id).to_json)
  sent.all? { |o| o['id'].is_a?(Float) } && sent.zip(HELD).any? { |o, (id, _, _)| o['id'].to_i.to_s != id }
end

puts "1..#{$n}"
puts "# pass #{$pass}"
puts "# fail #{$fail}"
