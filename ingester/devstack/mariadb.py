"""A private MariaDB server with row-based binary logging, for tests and local development.

The server reads only the my.cnf written into its own datadir and listens on 127.0.0.1, so it never
depends on (or disturbs) a system MariaDB service.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, NamedTuple, Self
from urllib.parse import quote

import pymysql
from pymysql.connections import Connection

from ingester.devstack.process import PortTaken, ServerProcess, die_with_parent, free_tcp_port, tail

_SEARCH_DIRS = ("/usr/sbin", "/usr/bin", "/usr/local/sbin", "/usr/local/bin")
_SOCKET_PATH_MAX = 107  # sun_path holds 108 bytes including the terminating NUL


class BinlogPosition(NamedTuple):
    """Where the server writes its binary log next."""

    file: str
    position: int


def _find_binary(names: tuple[str, ...], what: str) -> Path:
    """Search PATH and the sbin directories, which Debian leaves off a normal user's PATH."""
    search_path = os.pathsep.join([os.environ.get("PATH", ""), *_SEARCH_DIRS])
    for name in names:
        if found := shutil.which(name, path=search_path):
            return Path(found)
    raise FileNotFoundError(
        f"{what} ({' or '.join(names)}) not found on PATH or in /usr/sbin; "
        "run scripts/bootstrap to install it"
    )


def find_mariadbd() -> Path:
    """The MariaDB server binary: we start our own server instead of relying on a system service."""
    return _find_binary(("mariadbd", "mysqld"), "MariaDB server")


class SQLServer:
    """Client helpers shared by every server the tests talk to, so a MySQL container can stand in for
    the local MariaDB: subclasses provide host, port, user and password."""

    host: str
    port: int
    user: str
    password: str
    # MariaDB's name; MySQL 8.4 removed SHOW MASTER STATUS in favour of SHOW BINARY LOG STATUS.
    binlog_status_sql = "SHOW BINLOG STATUS"

    @property
    def url(self) -> str:
        """mysql://user[:password]@host:port?tls=..., the form binlake's configuration takes. A private
        server started without certificates says ``tls=disabled`` explicitly (binlake verifies TLS by
        default)."""
        auth = quote(self.user, safe="") + (f":{quote(self.password, safe='')}" if self.password else "")
        return f"mysql://{auth}@{self.host}:{self.port}?{self.tls_query}"

    @property
    def tls_query(self) -> str:
        return "tls=disabled"

    def connect(self, database: str | None = None, **kw: Any) -> Connection:
        """A new autocommit utf8mb4 connection (the caller closes it); keywords override the defaults."""
        params: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "password": self.password,
            "database": database,
            "charset": "utf8mb4",
            "autocommit": True,
        }
        return pymysql.connect(**(params | kw))

    def execute(self, sql: str, params: Any = None) -> list[tuple[Any, ...]]:
        """Run one statement on its own connection and return its rows (none for statements without)."""
        with self.connect() as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return list(cur.fetchall())

    def flush_logs(self) -> None:
        """Close the current binary log and open the next one, so the closed file is complete on disk."""
        self.execute("FLUSH BINARY LOGS")

    def current_binlog_position(self) -> BinlogPosition:
        """Where a reader must start to see only what happens from now on."""
        rows = self.execute(self.binlog_status_sql)
        if not rows:
            raise RuntimeError(f"binary logging is off on {self.host}:{self.port}")
        return BinlogPosition(rows[0][0], int(rows[0][1]))


class PrivateSQLServer(SQLServer, ServerProcess):
    """A private server of the MySQL family on 127.0.0.1 with ROW binary logging, in a temporary or a persistent
    directory: its option file, socket, error log and pid file in that directory, its data in ``datadir``.

    Without a directory it uses a temporary one that close() (or leaving the with block) removes. A given one is
    initialized on first start and reused afterwards, so a server made with the same directory and port keeps its
    data across restarts, and a second instance on that directory can stop() the server. Subclasses give the
    binary, the initialization and their own settings (MariaDBServer, mysql.MySQLServer).
    """

    host = "127.0.0.1"
    user = "root"
    password = ""
    # Least-privilege account for exercising the replication client as a real deployment would run it.
    replication_user = "binlake_repl"
    replication_password = "binlake_repl"
    program = "mysqld"  # in messages

    def __init__(self, datadir: str | os.PathLike[str] | None, port: int | None, prefix: str,
                 settings: Mapping[str, object], start_timeout: float) -> None:
        self._temporary = datadir is None
        self._datadir = Path(datadir if datadir is not None else tempfile.mkdtemp(prefix=prefix)).absolute()
        self._fixed_port = port is not None
        self.port = port if port is not None else free_tcp_port()
        self._settings: dict[str, object] = dict(settings)
        self._start_timeout = start_timeout
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def datadir(self) -> Path:
        return self._datadir

    @property
    def binlog_dir(self) -> Path:
        return self.datadir

    @property
    def config_file(self) -> Path:
        """The only option file the server reads; `mariadb --defaults-file=<it>` connects as root."""
        return self._datadir / "my.cnf"

    @property
    def error_log(self) -> Path:
        return self._datadir / "error.log"

    @property
    def _socket(self) -> Path:
        return self._datadir / f"{self.program}.sock"

    @property
    def _pid_file(self) -> Path:
        return self._datadir / f"{self.program}.pid"

    @staticmethod
    def binlog_settings(row_metadata: str, checksum: str, row_image: str, server_id: int) -> dict[str, object]:
        """The [mysqld] settings of a ROW binary log (what the constructors' keywords of the same names set)."""
        return {"binlog_format": "ROW", "binlog_row_metadata": row_metadata, "binlog_checksum": checksum,
                "binlog_row_image": row_image, "server_id": server_id}

    def _binary(self) -> Path:
        raise NotImplementedError

    def _initialized(self) -> bool:
        return (self.datadir / "mysql").is_dir()

    def _initialize(self) -> None:
        """Create the system tables: root without a password over TCP, plus the replication account."""
        raise NotImplementedError

    def start(self, *, detach: bool = False) -> Self:
        """Initialize the datadir if needed, launch the server and wait until it answers SQL on its port.

        detach=True lets the server outlive this process (for `binlake devstack up`); otherwise Linux
        stops it when this process dies, so even a killed test run leaves no stray server.
        """
        self._refuse_second()
        if len(os.fsencode(self._socket)) > _SOCKET_PATH_MAX:
            raise ValueError(
                f"socket path {self._socket} is longer than {_SOCKET_PATH_MAX} bytes; use a shorter datadir"
            )
        server = self._binary()
        self._datadir.mkdir(parents=True, exist_ok=True)
        retries = 0 if self._fixed_port else 2
        while True:
            self._write_config()
            if not self._initialized():
                self._initialize()
            try:
                self._launch(server, detach)
                return self
            except PortTaken:
                if retries == 0:
                    raise
                retries -= 1
                self.port = free_tcp_port()

    def binlog_files(self) -> list[Path]:
        """The server's binary logs, oldest first, as paths in the datadir."""
        return [self.binlog_dir / row[0] for row in self.execute("SHOW BINARY LOGS")]

    def _mysqld(self) -> dict[str, object]:
        """The [mysqld] settings of the option file: where everything is, then the server's settings."""
        mysqld: dict[str, object] = {
            "datadir": self.datadir,
            "port": self.port,
            "bind_address": self.host,
            "socket": self._socket,
            "pid_file": self._pid_file,
            "log_error": self.error_log,
            "log_bin": self.binlog_dir / "binlog",
            # Its own temporary files (bootstrap included) beside its data: a shared /tmp lost them
            # to other servers started in parallel ("Error on delete of '/tmp/#sql-temptable-...'").
            "tmpdir": self._datadir,
            **self._settings,
        }
        if os.geteuid() == 0:
            mysqld.setdefault("user", "root")  # the server refuses to run as root unless told to
        return mysqld

    def _write_config(self) -> None:
        """Write my.cnf from scratch on every start, so constructor options always win over an old file."""
        lines = ["[mysqld]"]
        lines += [
            key if value is True else f"{key}={value}"
            for key, value in self._mysqld().items()
            if value is not None and value is not False
        ]
        lines += [
            "",
            "[client]",
            f"host={self.host}",
            f"port={self.port}",
            f"user={self.user}",
            f"socket={self._socket}",
            "",
        ]
        self.config_file.write_text("\n".join(lines))

    def _initialization_failed(self, program: str, result: subprocess.CompletedProcess[str]) -> RuntimeError:
        log = self.error_log.read_text(errors="replace") if self.error_log.exists() else ""
        return RuntimeError(
            f"{program} failed (exit {result.returncode}) for {self._datadir}, which may now be "
            f"half-initialized; remove it before retrying. Output:\n"
            f"{tail(result.stdout + result.stderr + log)}"
        )

    def _launch(self, server: Path, detach: bool) -> None:
        log_offset = self.error_log.stat().st_size if self.error_log.exists() else 0
        with self.error_log.open("ab") as log:
            self._proc = subprocess.Popen(
                [str(server), f"--defaults-file={self.config_file}"],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                start_new_session=detach,
                preexec_fn=die_with_parent if not detach and sys.platform == "linux" else None,
            )
        self._wait_ready(self._proc, log_offset)

    def _wait_ready(self, proc: subprocess.Popen[bytes], log_offset: int) -> None:
        deadline = time.monotonic() + self._start_timeout
        while not self._serves_our_datadir():
            if (code := proc.poll()) is not None:
                self._proc = None
                log = self._log_since(log_offset)
                error = PortTaken if "Address already in use" in log else RuntimeError
                raise error(
                    f"{self.program} exited with code {code} before serving {self.host}:{self.port}; "
                    f"end of {self.error_log}:\n{log}"
                )
            if time.monotonic() > deadline:
                self.stop()
                raise TimeoutError(
                    f"{self.program} did not serve {self.host}:{self.port} within {self._start_timeout:g}s; "
                    f"end of {self.error_log}:\n{self._log_since(log_offset)}"
                )
            time.sleep(0.05)

    def _serves_our_datadir(self) -> bool:
        """Connect and compare @@datadir: a foreign server that grabbed our port must not pass for ours
        (and the read timeout stops a listener that never speaks from stalling the wait)."""
        try:
            with self.connect(connect_timeout=1, read_timeout=1) as conn, conn.cursor() as cur:
                cur.execute("SELECT @@datadir")
                (datadir,) = cur.fetchone()
        except pymysql.MySQLError:
            return False
        return Path(datadir).resolve() == self.datadir.resolve()

    @property
    def _marker(self) -> Path:
        return self.config_file

    @property
    def _server_log(self) -> Path:
        return self.error_log


class MariaDBServer(PrivateSQLServer):
    """A private mariadbd on 127.0.0.1 with ROW binary logging, in a temporary or a persistent datadir.

    Without a datadir it uses a temporary one that close() (or leaving the with block) removes. A given
    datadir is initialized on first start and reused afterwards, so MariaDBServer(datadir=..., port=3307)
    keeps its data across restarts, and a second instance on that datadir can stop() the server.
    """

    what = "MariaDB server"
    program = "mariadbd"

    def __init__(
        self,
        datadir: str | os.PathLike[str] | None = None,
        port: int | None = None,
        *,
        binlog_row_metadata: str = "FULL",
        binlog_checksum: str = "CRC32",
        binlog_row_image: str = "FULL",
        server_id: int = 1,
        options: Mapping[str, object] | None = None,
        start_timeout: float = 60.0,
    ) -> None:
        """options adds or overrides [mysqld] settings: True writes a bare flag, None or False drops one."""
        super().__init__(datadir, port, "binlake-mariadb-", {
            **self.binlog_settings(binlog_row_metadata, binlog_checksum, binlog_row_image, server_id),
            "character_set_server": "utf8mb4",
            "collation_server": "utf8mb4_general_ci",
            "skip_name_resolve": True,
            # Small InnoDB sizes keep initialization and start-up well under a second.
            "innodb_buffer_pool_size": "16M",
            "innodb_log_file_size": "8M",
            "max_allowed_packet": "1G",
            **(options or {}),
        }, start_timeout)

    @property
    def tls_query(self) -> str:
        """Verified TLS when the server was given a certificate (``ssl_cert``, ``ssl_key``, ``ssl_ca``)."""
        ca = self._settings.get("ssl_ca")
        return f"tls=verify-identity&tls-ca={quote(str(ca), safe='/')}" if ca else "tls=disabled"

    def _binary(self) -> Path:
        return find_mariadbd()

    def _initialize(self) -> None:
        """Create the system tables: root without a password over TCP, plus the replication account."""
        installer = _find_binary(("mariadb-install-db", "mysql_install_db"), "MariaDB installer")
        # Bootstrap mode runs without grant tables and takes one statement per line.
        init_sql = "\n".join(
            [
                "FLUSH PRIVILEGES;",
                f"CREATE USER '{self.replication_user}'@'%' IDENTIFIED BY '{self.replication_password}';",
                f"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO '{self.replication_user}'@'%';",
                "",
            ]
        )
        with tempfile.NamedTemporaryFile("w", suffix=".sql") as extra:
            extra.write(init_sql)
            extra.flush()
            result = subprocess.run(
                [
                    str(installer),
                    f"--defaults-file={self.config_file}",
                    "--auth-root-authentication-method=normal",
                    "--skip-test-db",
                    f"--extra-file={extra.name}",
                ],
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                check=False,
            )
        if result.returncode != 0:
            raise self._initialization_failed(installer.name, result)
