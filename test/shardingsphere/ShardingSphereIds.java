/*
 * ShardingSphereIds: the IDs of Apache ShardingSphere's Snowflake generator
 * (SnowflakeKeyGenerateAlgorithm) as a JVM computes them, for test/shardingsphere/check.sh
 * to compare with the extension's "shardingsphere@ZONE" layouts.
 *
 * ShardingSphere's published algorithm: the epoch is a java.util.Calendar
 * of the JVM's default time zone (and locale) set to 2016-11-01 00:00:00.000,
 * taken once when the generator's class loads; an ID is
 * ((milliseconds - epoch) << 22) | (worker << 12) | sequence.
 *
 *   java -Duser.timezone=ZONE ShardingSphereIds < commands
 *
 * reads one command a line and answers each with one line:
 *
 *   zone                       the JVM's default zone, as Java names it
 *   epoch                      the epoch, in Unix milliseconds
 *   id MILLIS WORKER SEQ       the ID made at that time by that worker
 *   decode ID                  MILLIS WORKER SEQ of an ID
 *
 *   java ShardingSphereIds --zones < names
 *
 * reads zone names and answers each with "NAME JAVA_ID EPOCH": the epoch
 * of a JVM whose default zone is set to that name, and the name Java gave
 * the zone (another one, usually "GMT", when Java does not know the name).
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.Calendar;
import java.util.TimeZone;

public final class ShardingSphereIds {
    private static final int WORKER_BITS = 10;
    private static final int SEQUENCE_BITS = 12;

    /* The epoch as the generator's static initializer computes it. */
    private static long epoch() {
        Calendar c = Calendar.getInstance();
        c.set(2016, Calendar.NOVEMBER, 1);
        c.set(Calendar.HOUR_OF_DAY, 0);
        c.set(Calendar.MINUTE, 0);
        c.set(Calendar.SECOND, 0);
        c.set(Calendar.MILLISECOND, 0);
        return c.getTimeInMillis();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;

        if (args.length == 1 && args[0].equals("--zones")) {
            while ((line = in.readLine()) != null) {
                String name = line.trim();
                if (name.isEmpty())
                    continue;
                TimeZone.setDefault(TimeZone.getTimeZone(name));
                System.out.println(name + " " + TimeZone.getDefault().getID() + " " + epoch());
            }
            return;
        }
        if (args.length != 0) {
            System.err.println("usage: java -Duser.timezone=ZONE ShardingSphereIds < commands, or ShardingSphereIds --zones < names");
            System.exit(2);
        }

        final long epoch = epoch();
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            switch (w[0]) {
                case "zone":
                    System.out.println(TimeZone.getDefault().getID());
                    break;
                case "epoch":
                    System.out.println(epoch);
                    break;
                case "id": {
                    long millis = Long.parseLong(w[1]);
                    long worker = Long.parseLong(w[2]);
                    long seq = Long.parseLong(w[3]);
                    System.out.println(((millis - epoch) << (WORKER_BITS + SEQUENCE_BITS))
                                       | (worker << SEQUENCE_BITS) | seq);
                    break;
                }
                case "decode": {
                    long id = Long.parseLong(w[1]);
                    System.out.println(((id >> (WORKER_BITS + SEQUENCE_BITS)) + epoch) + " "
                                       + ((id >> SEQUENCE_BITS) & ((1L << WORKER_BITS) - 1)) + " "
                                       + (id & ((1L << SEQUENCE_BITS) - 1)));
                    break;
                }
                default:
                    System.err.println("unknown command: " + line);
                    System.exit(2);
            }
        }
    }
}
