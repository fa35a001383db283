-- The replication user binlake connects as (MySQL): the least it needs. Runs once, on an empty data
-- directory. The password is deploy/compose/source-password's (a local stack only).
CREATE USER IF NOT EXISTS 'binlake'@'%' IDENTIFIED BY 'binlake-dev';
GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'binlake'@'%';
GRANT SELECT ON shop.* TO 'binlake'@'%';
