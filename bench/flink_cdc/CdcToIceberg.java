import org.apache.flink.configuration.Configuration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.bridge.java.StreamTableEnvironment;

/**
 * The Flink CDC side of bench/run_flink_cdc.py: one MySQL table mirrored into an Iceberg upsert table by Flink
 * SQL on a local MiniCluster (parallelism 1, a checkpoint a second: each checkpoint commits an Iceberg snapshot).
 *
 * <p>Arguments: mysql-port database table server-id warehouse-dir [snapshot-chunk-rows]. The MySQL table is (id BIGINT primary key,
 * w TINYINT, v BIGINT, note VARCHAR); the Iceberg table, in a Hadoop catalog at the warehouse directory, is
 * database.table with w as INT (Iceberg has no TINYINT). snapshot-chunk-rows: the connector's
 * scan.incremental.snapshot.chunk.size (its default, 8096, unless given). Runs until killed.
 */
public final class CdcToIceberg {
    public static void main(String[] args) throws Exception {
        String port = args[0], database = args[1], table = args[2], serverId = args[3], warehouse = args[4];
        String chunk = args.length > 5 ? "'scan.incremental.snapshot.chunk.size' = '" + args[5] + "', " : "";
        Configuration conf = new Configuration();
        conf.setString("execution.checkpointing.interval", "1s");
        conf.setString("parallelism.default", "1");
        StreamExecutionEnvironment env = StreamExecutionEnvironment.createLocalEnvironment(1, conf);
        StreamTableEnvironment tenv = StreamTableEnvironment.create(env);
        tenv.executeSql("CREATE TABLE src (id BIGINT, w TINYINT, v BIGINT, note STRING, "
                + "PRIMARY KEY (id) NOT ENFORCED) WITH ("
                + "'connector' = 'mysql-cdc', 'hostname' = '127.0.0.1', 'port' = '" + port + "', "
                + "'username' = 'root', 'password' = '', "
                + "'database-name' = '" + database + "', 'table-name' = '" + table + "', "
                + "'server-id' = '" + serverId + "', 'server-time-zone' = 'UTC', " + chunk
                + "'scan.startup.mode' = 'initial')");
        tenv.executeSql("CREATE CATALOG lake WITH ('type' = 'iceberg', 'catalog-type' = 'hadoop', "
                + "'warehouse' = 'file://" + warehouse + "', 'property-version' = '1')");
        tenv.executeSql("CREATE DATABASE IF NOT EXISTS lake." + database);
        tenv.executeSql("CREATE TABLE IF NOT EXISTS lake." + database + "." + table
                + " (id BIGINT, w INT, v BIGINT, note STRING, PRIMARY KEY (id) NOT ENFORCED) WITH ("
                + "'format-version' = '2', 'write.upsert.enabled' = 'true')");
        System.err.println("binlake-bench: job submitted at " + System.currentTimeMillis());
        tenv.executeSql("INSERT INTO lake." + database + "." + table
                + " SELECT id, CAST(w AS INT), v, note FROM src").await();
    }
}
