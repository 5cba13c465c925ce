class OrderLine < ApplicationRecord
  belongs_to :order
end
