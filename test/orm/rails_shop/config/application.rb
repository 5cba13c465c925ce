# A Rails 6.1 application with Active Record only: what docs/orms.md's
# "Rails" runs its tasks in (test/orm/rails_test.rb).  Debian's gems, no
# Bundler.  With SCHEMA_FORMAT=sql it keeps db/structure.sql instead of
# db/schema.rb, configured by docs/orms.md's lines for it, which the test
# writes into config/structure_sql.rb.
require_relative "boot"
require "rails"
require "active_record/railtie"

module Shop
  class Application < Rails::Application
    config.load_defaults 6.1
    config.eager_load = false
    class_eval(File.read(File.join(__dir__, "structure_sql.rb"))) if ENV["SCHEMA_FORMAT"] == "sql"
  end
end
