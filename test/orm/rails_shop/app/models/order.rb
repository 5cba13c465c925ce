class Order < ApplicationRecord
  has_many :order_lines
end
