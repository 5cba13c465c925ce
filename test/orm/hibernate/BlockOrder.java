// docs/orms.md's entity whose keys come in blocks (SnowflakeBlockGenerator).
package shop;

import javax.persistence.Column;
import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.Id;
import javax.persistence.Table;

import org.hibernate.annotations.GenericGenerator;

@Entity
@Table(name = "block_orders")
public class BlockOrder {
    @Id
    @GeneratedValue(generator = "snowflake-block")
    @GenericGenerator(name = "snowflake-block", strategy = "shop.SnowflakeBlockGenerator")
    @Column(columnDefinition = "bigint DEFAULT snowflake.snowflake_nextval()")
    public Long id;

    public String item;
}
