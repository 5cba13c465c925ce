// docs/orms.md's block generator for Hibernate 3.6 (the pooled-lo style of
// docs/usage.md): one snowflake.snowflake_nextval_block(N) per N keys.
package shop;

import java.io.Serializable;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;

import org.hibernate.HibernateException;
import org.hibernate.engine.SessionImplementor;
import org.hibernate.id.IdentifierGenerator;

public class SnowflakeBlockGenerator implements IdentifierGenerator {
    private static final int N = 50;    // the allocationSize
    private long next, end;             // the block in hand: next .. end - 1

    @Override
    public synchronized Serializable generate(SessionImplementor session, Object entity) {
        if (next == end) {
            try (PreparedStatement st = session.connection().prepareStatement("SELECT snowflake.snowflake_nextval_block(?)")) {
                st.setInt(1, N);
                try (ResultSet rs = st.executeQuery()) {
                    rs.next();
                    next = rs.getLong(1);
                }
            } catch (SQLException e) {
                throw new HibernateException("snowflake.snowflake_nextval_block() failed", e);
            }
            end = next + N;
        }
        return next++;
    }
}
