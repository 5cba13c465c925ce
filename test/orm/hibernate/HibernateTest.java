// Hibernate 3.6 (Debian 12's libhibernate3-java) with snowflake keys, as
// docs/orms.md's "Hibernate" says, whose Java blocks are this test's
// (HIBERNATE_SOURCES names its directory): IDENTITY with hbm2ddl.auto=update makes a
// sequence of its own; IDENTITY on a table made with the extension's default
// takes the key from it; the generators SnowflakeGenerator and
// SnowflakeBlockGenerator give keys from the extension, one per round trip
// or one block of 50, and hbm2ddl.auto=update makes their tables with the
// extension's default and leaves them so.  Connects through PostgreSQL's
// Unix socket (PgJDBC with junixsocket) with libpq's variables PGHOST,
// PGPORT, PGUSER and PGDATABASE (test/orm/run.sh sets them).  Prints TAP:
// "ok N - name" per test, then "# pass N", "# fail N".
package shop;

import java.nio.file.Files;
import java.nio.file.Path;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

import org.hibernate.Session;
import org.hibernate.SessionFactory;
import org.hibernate.Transaction;
import org.hibernate.cfg.Configuration;

public class HibernateTest {
    static final String URL = "jdbc:postgresql://localhost/" + System.getenv("PGDATABASE")
        + "?user=" + System.getenv("PGUSER")
        + "&socketFactory=org.newsclub.net.unix.AFUNIXSocketFactory$FactoryArg&socketFactoryArg="
        + System.getenv("PGHOST") + "/.s.PGSQL." + Objects.requireNonNullElse(System.getenv("PGPORT"), "5432");

    interface Check { void run() throws Exception; }

    static int n, passed, failed;

    static void test(String name, Check check) {
        n++;
        try {
            check.run();
            passed++;
            System.out.println("ok " + n + " - " + name);
        } catch (Throwable e) {
            failed++;
            System.out.println("not ok " + n + " - " + name);
            System.out.println("# " + e.toString().replace("\n", "\n# "));
            for (Throwable c = e.getCause(); c != null; c = c.getCause())
                System.out.println("# caused by " + c.toString().replace("\n", "\n# "));
        }
    }

    static void check(boolean ok, String what) {
        if (!ok)
            throw new AssertionError(what);
    }

    static SessionFactory factory(String hbm2ddl, Class<?>... entities) {
        Configuration cfg = new Configuration()
            .setProperty("hibernate.connection.driver_class", "org.postgresql.Driver")
            .setProperty("hibernate.connection.url", URL)
            .setProperty("hibernate.dialect", "org.hibernate.dialect.PostgreSQLDialect")
            .setProperty("hibernate.hbm2ddl.auto", hbm2ddl);
        for (Class<?> e : entities)
            cfg.addAnnotatedClass(e);
        return cfg.buildSessionFactory();
    }

    static List<String> column(String sql, Object... params) throws SQLException {
        try (Connection c = DriverManager.getConnection(URL); PreparedStatement st = c.prepareStatement(sql)) {
            for (int i = 0; i < params.length; i++)
                st.setObject(i + 1, params[i]);
            List<String> out = new ArrayList<>();
            try (ResultSet rs = st.executeQuery()) {
                while (rs.next())
                    out.add(rs.getString(1));
            }
            return out;
        }
    }

    static String one(String sql, Object... params) throws SQLException {
        List<String> rows = column(sql, params);
        check(rows.size() == 1, sql + " gave " + rows);
        return rows.get(0);
    }

    static String keyDefault(String table) throws SQLException {
        return one("SELECT coalesce(column_default, '(none)') FROM information_schema.columns"
            + " WHERE table_schema = 'public' AND table_name = ? AND column_name = 'id'", table);
    }

    // a snowflake key of this node: above 2^53, the row's, worker id 7
    static void snowflakeKey(long id, String table) throws SQLException {
        check(id > (1L << 53), id + " is not a snowflake ID");
        check(one("SELECT count(*) FROM " + table + " WHERE id = ?", id).equals("1"), "no row " + id + " in " + table);
        check(one("SELECT worker_id FROM snowflake.snowflake_decode(?)", id).equals("7"), id + " is not worker 7's");
    }

    static <T> T saved(SessionFactory sf, T entity) {
        Session s = sf.openSession();
        Transaction t = s.beginTransaction();
        s.save(entity);
        t.commit();
        s.close();
        return entity;
    }

    public static void main(String[] args) {
        test("docs/orms.md's Java for Hibernate is this test's", () -> {
            String doc = Files.readString(Path.of(System.getenv("SNOWFLAKE_DOCS"), "orms.md"));
            Matcher section = Pattern.compile("(?ms)^## Hibernate\n(.*?)(?=^## |\\z)").matcher(doc);
            check(section.find(), "no section Hibernate");
            StringBuilder sources = new StringBuilder();
            try (var files = Files.list(Path.of(System.getenv("HIBERNATE_SOURCES")))) {
                for (Path f : (Iterable<Path>) files::iterator)
                    sources.append(Files.readString(f));
            }
            Matcher block = Pattern.compile("(?ms)^```java\n(.*?)^```$").matcher(section.group(1));
            int blocks = 0;
            while (block.find()) {
                blocks++;
                check(sources.indexOf(block.group(1)) >= 0, "not in the test's sources:\n" + block.group(1));
            }
            check(blocks == 3, blocks + " blocks");
        });

        test("the application's sessions run without snowflake in search_path", () ->
            check(one("SHOW search_path").equals("\"$user\", public"), "search_path " + one("SHOW search_path")));

        test("not IDENTITY with hbm2ddl.auto=update: it makes the key a sequence of its own", () -> {
            SessionFactory sf = factory("update", IdentityOrder.class);
            IdentityOrder o = new IdentityOrder();
            o.item = "book";
            saved(sf, o);
            sf.close();
            check(keyDefault("identity_orders").equals("nextval('identity_orders_id_seq'::regclass)"),
                "the default is " + keyDefault("identity_orders"));
            check(o.id == 1, "the key is " + o.id);
        });

        test("IDENTITY on a table made with the extension's default (hbm2ddl.auto=validate) takes the key from it", () -> {
            try (Connection c = DriverManager.getConnection(URL)) {
                c.createStatement().execute("DROP TABLE identity_orders");
                c.createStatement().execute("CREATE TABLE identity_orders"
                    + " (id bigint PRIMARY KEY DEFAULT snowflake.snowflake_nextval(), item varchar(255))");
            }
            SessionFactory sf = factory("validate", IdentityOrder.class);
            IdentityOrder o = new IdentityOrder();
            o.item = "book";
            saved(sf, o);
            sf.close();
            snowflakeKey(o.id, "identity_orders");
        });

        test("SnowflakeGenerator: hbm2ddl.auto=update makes the table with the extension's default, keys from it", () -> {
            SessionFactory sf = factory("update", Order.class);
            check(keyDefault("orders").equals("snowflake.snowflake_nextval()"), "the default is " + keyDefault("orders"));
            long last = 0;
            for (String item : new String[] {"book", "pen", "ink"}) {
                Order o = new Order();
                o.item = item;
                saved(sf, o);
                snowflakeKey(o.id, "orders");
                check(o.id > last, o.id + " after " + last);
                last = o.id;
            }
            sf.close();
            // run again: update changes nothing, and no sequence appeared
            factory("update", Order.class).close();
            check(keyDefault("orders").equals("snowflake.snowflake_nextval()"), "the default is " + keyDefault("orders"));
            check(column("SELECT relname FROM pg_class WHERE relkind = 'S' AND relname LIKE 'orders%'").isEmpty(),
                "a sequence for orders");
        });

        test("the default serves rows inserted with SQL beside Hibernate", () -> {
            long id = Long.parseLong(one("INSERT INTO orders (item) VALUES ('paper') RETURNING id"));
            snowflakeKey(id, "orders");
        });

        test("SnowflakeBlockGenerator: 120 keys in blocks of 50, each block's consecutive, all unique", () -> {
            SessionFactory sf = factory("update", BlockOrder.class);
            check(keyDefault("block_orders").equals("snowflake.snowflake_nextval()"),
                "the default is " + keyDefault("block_orders"));
            Session s = sf.openSession();
            Transaction t = s.beginTransaction();
            List<Long> ids = new ArrayList<>();
            for (int i = 0; i < 120; i++) {
                BlockOrder o = new BlockOrder();
                o.item = "item " + i;
                s.save(o);
                ids.add(o.id);
            }
            t.commit();
            s.close();
            sf.close();
            // pooled-lo: the keys of each block of 50 consecutive
            for (int i = 1; i < ids.size(); i++) {
                check(ids.get(i) > ids.get(i - 1), "keys out of order at " + i);
                check(i % 50 == 0 || ids.get(i) == ids.get(i - 1) + 1, "a block's keys not consecutive at " + i);
            }
            check(one("SELECT count(DISTINCT id) FROM block_orders").equals("120"), "rows lost");
            for (long id : ids)
                snowflakeKey(id, "block_orders");
        });

        System.out.println("1.." + n);
        System.out.println("# pass " + passed);
        System.out.println("# fail " + failed);
    }
}
