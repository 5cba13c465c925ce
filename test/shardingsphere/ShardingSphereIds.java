/*
 * ShardingSphereIds: the IDs of Apache ShardingSphere's Snowflake generator
 * (SnowflakeKeyGenerateAlgorithm) as a JVM computes them, for
 * test/shardingsphere/check.sh to compare with the extension's
 * "shardingsphere" layouts.
 *
 * An ID is ((milliseconds - epoch) << 22) | (worker << 12) | sequence.  The
 * epoch is taken once, when the generator's class loads, by one of three
 * rules, as ShardingSphere's releases took it:
 *
 *   calendar  up to 5.3: a java.util.Calendar of the JVM's default time zone
 *             (and locale) set to 2016-11-01 00:00:00.000, which is local
 *             midnight at the offset the zone had that day;
 *   started   from 5.4: 2016-11-01T00:00 as a LocalDateTime, at the offset
 *             the default zone has at the instant the class loads;
 *   utc       after apache/shardingsphere#38932: 2016-11-01T00:00 UTC.
 *
 *   java -Duser.timezone=ZONE [-Dsnowflake.rule=RULE] ShardingSphereIds < commands
 *
 * reads one command a line and answers each with one line:
 *
 *   jvm ZONE RULE [START]      sets the default zone to ZONE and takes the
 *                              epoch by RULE, as a class loading at START
 *                              (an ISO instant; now if absent) does;
 *                              answers the zone as Java names it, and the
 *                              epoch
 *   zone                       the JVM's default zone, as Java names it
 *   epoch                      the epoch, in Unix milliseconds
 *   id MILLIS WORKER SEQ       the ID made at that time by that worker
 *   decode ID                  MILLIS WORKER SEQ of an ID
 *
 * Before any "jvm" command the epoch is RULE's (calendar if not given) in
 * the zone the JVM started with, taken now.
 *
 *   java ShardingSphereIds --zones RULE [START] < names
 *
 * reads zone names and answers each with "NAME JAVA_ID EPOCH": the epoch by
 * RULE of a JVM whose default zone is set to that name, and the name Java
 * gave the zone (another one, usually "GMT", when Java does not know the
 * name).
 */
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;
import java.time.LocalDateTime;
import java.time.ZoneId;
import java.time.ZoneOffset;
import java.util.Calendar;
import java.util.TimeZone;

public final class ShardingSphereIds {
    private static final int WORKER_BITS = 10;
    private static final int SEQUENCE_BITS = 12;

    /* The epoch as the generator's static initializer of each rule computes it. */
    private static long epoch(String rule, Instant loaded) {
        switch (rule) {
            case "calendar": {
                Calendar c = Calendar.getInstance();
                c.set(2016, Calendar.NOVEMBER, 1);
                c.set(Calendar.HOUR_OF_DAY, 0);
                c.set(Calendar.MINUTE, 0);
                c.set(Calendar.SECOND, 0);
                c.set(Calendar.MILLISECOND, 0);
                return c.getTimeInMillis();
            }
            case "started":
                return LocalDateTime.of(2016, 11, 1, 0, 0, 0)
                    .toInstant(ZoneId.systemDefault().getRules().getOffset(loaded)).toEpochMilli();
            case "utc":
                return LocalDateTime.of(2016, 11, 1, 0, 0, 0).toInstant(ZoneOffset.UTC).toEpochMilli();
            default:
                System.err.println("unknown rule: " + rule + " (calendar, started or utc)");
                System.exit(2);
                return 0;
        }
    }

    private static Instant instant(String[] w, int i) {
        return w.length > i ? Instant.parse(w[i]) : Instant.now();
    }

    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;

        if (args.length >= 2 && args[0].equals("--zones")) {
            Instant loaded = instant(args, 2);
            while ((line = in.readLine()) != null) {
                String name = line.trim();
                if (name.isEmpty())
                    continue;
                TimeZone.setDefault(TimeZone.getTimeZone(name));
                System.out.println(name + " " + TimeZone.getDefault().getID() + " " + epoch(args[1], loaded));
            }
            return;
        }
        if (args.length != 0) {
            System.err.println("usage: java -Duser.timezone=ZONE ShardingSphereIds < commands, or ShardingSphereIds --zones RULE [START] < names");
            System.exit(2);
        }

        long epoch = epoch(System.getProperty("snowflake.rule", "calendar"), Instant.now());
        while ((line = in.readLine()) != null) {
            String[] w = line.trim().split("\\s+");
            switch (w[0]) {
                case "jvm":
                    TimeZone.setDefault(TimeZone.getTimeZone(w[1]));
                    epoch = epoch(w[2], instant(w, 3));
                    System.out.println(TimeZone.getDefault().getID() + " " + epoch);
                    break;
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
