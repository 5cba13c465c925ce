// An IDENTITY key, which docs/orms.md says not to let hbm2ddl make a table
// for: it makes a sequence of its own, also with this columnDefinition.
package shop;

import javax.persistence.Column;
import javax.persistence.Entity;
import javax.persistence.GeneratedValue;
import javax.persistence.GenerationType;
import javax.persistence.Id;
import javax.persistence.Table;

@Entity
@Table(name = "identity_orders")
public class IdentityOrder {
    @Id
    @GeneratedValue(strategy = GenerationType.IDENTITY)
    @Column(columnDefinition = "bigint DEFAULT snowflake.snowflake_nextval()")
    public Long id;

    public String item;
}
