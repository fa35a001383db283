"""Local services for tests and development: private database servers started from the user's session."""

from ingester.devstack.mariadb import BinlogPosition, MariaDBServer, PrivateSQLServer, SQLServer, find_mariadbd
from ingester.devstack.process import free_tcp_port

__all__ = ["BinlogPosition", "MariaDBServer", "PrivateSQLServer", "SQLServer", "find_mariadbd", "free_tcp_port"]
