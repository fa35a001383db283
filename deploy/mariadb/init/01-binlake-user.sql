-- The replication user binlake connects as (MariaDB 10.5+: BINLOG MONITOR instead of REPLICATION
-- CLIENT). Runs once, on an empty data directory. The password is deploy/compose/source-password's.
CREATE USER IF NOT EXISTS 'binlake'@'%' IDENTIFIED BY 'binlake-dev';
GRANT REPLICATION SLAVE, BINLOG MONITOR ON *.* TO 'binlake'@'%';
GRANT SELECT ON shop.* TO 'binlake'@'%';
