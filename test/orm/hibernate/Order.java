// docs/orms.md's entity for Hibernate 3.6: its key from SnowflakeGenerator,
// and, for the tables hbm2ddl makes, the extension's default in the DDL.
package shop;

import javax.persistence.Column;
import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.Id;
import javax.persistence.Table;

import org.hibernate.annotations.GenericGenerator;

@Entity
@Table(name = "orders")
public class Order {
    @Id
    @GeneratedValue(generator = "snowflake")
    @GenericGenerator(name = "snowflake", strategy = "shop.SnowflakeGenerator")
    @Column(columnDefinition = "bigint DEFAULT snowflake.snowflake_nextval()")
    public Long id;

    public String item;
}
