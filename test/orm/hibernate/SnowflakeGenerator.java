// docs/orms.md's generator for Hibernate 3.6: each new entity's key from
// snowflake.snowflake_nextval(), on the session's own connection (so in
// its transaction), before the INSERT.
package shop;

import java.io.Serializable;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

import org.hibernate.HibernateException;
import org.hibernate.engine.SessionImplementor;
import org.hibernate.id.IdentifierGenerator;

public class SnowflakeGenerator implements IdentifierGenerator {
    @Override
    public Serializable generate(SessionImplementor session, Object entity) {
        try (PreparedStatement st = session.connection().prepareStatement("SELECT snowflake.snowflake_nextval()");
             ResultSet rs = st.executeQuery()) {
            rs.next();
            return rs.getLong(1);
        } catch (SQLException e) {
            throw new HibernateException("snowflake.snowflake_nextval() failed", e);
        }
    }
}
