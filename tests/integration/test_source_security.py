"""TLS and authentication to the source, against a real MariaDB configured with certificates made here.

binlake verifies the server's certificate and name by default; weaker modes must be asked for, and a
server that offers no TLS is refused unless TLS is disabled explicitly. MariaDB's ed25519 accounts
replicate like any other.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from ingester.cli.consume import committed_events
from ingester.cli.main import main
from ingester.codec.events import RowsEvent
from ingester.sources.replication import ReplicationError, SourceURL

pytestmark = pytest.mark.integration

USER, PASSWORD = "tls_repl", "Tls-Secret-91"


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def _authority(directory: Path, name: str) -> tuple[Path, Path]:
    key, cert = directory / f"{name}-ca.key", directory / f"{name}-ca.pem"
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name} test CA",
             "-keyout", str(key), "-out", str(cert))
    return key, cert


@pytest.fixture(scope="module")
def certificates(tmp_path_factory) -> dict[str, Path]:
    """A CA, a server certificate for IP 127.0.0.1 only (so "localhost" does not match), and a second,
    unrelated CA."""
    d = tmp_path_factory.mktemp("tls")
    ca_key, ca = _authority(d, "binlake")
    _, rogue = _authority(d, "rogue")
    key, csr, cert, ext = d / "server.key", d / "server.csr", d / "server.pem", d / "san.cnf"
    ext.write_text("subjectAltName = IP:127.0.0.1\n")
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", "/CN=binlake test server", "-keyout", str(key),
             "-out", str(csr))
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
             "-days", "2", "-extfile", str(ext), "-out", str(cert))
    return {"ca": ca, "cert": cert, "key": key, "rogue": rogue}


@pytest.fixture(scope="module")
def tls_server(certificates, tmp_path_factory):
    from ingester.devstack.mariadb import MariaDBServer

    server = MariaDBServer(options={"ssl_ca": certificates["ca"], "ssl_cert": certificates["cert"],
                                    "ssl_key": certificates["key"]})
    with server:
        server.execute("CREATE DATABASE s CHARACTER SET utf8mb4")
        server.execute("CREATE TABLE s.t (id INT PRIMARY KEY, v VARCHAR(20))")
        server.execute("INSERT INTO s.t VALUES (1, 'one'), (2, 'two'), (3, 'three')")
        # An account that cannot log in without TLS: whatever connects as it is encrypted.
        server.execute(f"CREATE USER {USER}@'%' IDENTIFIED BY '{PASSWORD}' REQUIRE SSL")
        server.execute(f"GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO {USER}@'%'")
        yield server


def _url(server, host: str = "127.0.0.1", **query: str) -> str:
    params = "&".join(f"{k.replace('_', '-')}={v}" for k, v in query.items())
    return f"mysql://{USER}:{PASSWORD}@{host}:{server.port}" + (f"?{params}" if params else "")


def test_verified_tls_replicates_into_kafka(tls_server, certificates, kafka) -> None:
    url = _url(tls_server, tls="verify-identity", tls_ca=str(certificates["ca"]))
    with SourceURL.parse(url).connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        assert cur.fetchone()[1].startswith("TLS")
    assert main(["run", "--source", url, "--kafka", kafka.bootstrap, "--topic-prefix", "tls", "--server-id", "6101",
                 "--exit-at-end"]) == 0
    rows = {r["after"]["id"]: r["after"]["v"] for ev in committed_events(kafka.bootstrap, "tls")
            if isinstance(ev, RowsEvent) for r in ev.rows}
    assert rows == dict(tls_server.execute("SELECT id, v FROM s.t"))


def test_certificate_from_another_ca_is_refused(tls_server, certificates) -> None:
    with pytest.raises(ReplicationError, match=re.escape("certificate was not accepted: it is not signed by the CA in "
                                                         f"tls-ca={certificates['rogue']}")):
        SourceURL.parse(_url(tls_server, tls="verify-ca", tls_ca=str(certificates["rogue"]))).connect()


def test_host_name_is_verified_unless_told_otherwise(tls_server, certificates) -> None:
    # The certificate names 127.0.0.1, not localhost: the same server by another name is refused...
    with pytest.raises(ReplicationError, match=r"certificate was not accepted: it does not name localhost .*"
                                               r"set tls=verify-ca to verify its CA alone"):
        SourceURL.parse(_url(tls_server, "localhost", tls_ca=str(certificates["ca"]))).connect()
    # ... unless the mode says the CA alone is enough.
    SourceURL.parse(_url(tls_server, "localhost", tls="verify-ca", tls_ca=str(certificates["ca"]))).connect().close()


def test_plaintext_needs_an_explicit_opt_out(tls_server, mariadb) -> None:
    # A server without TLS is refused by default ...
    with pytest.raises(ReplicationError, match="does not offer TLS, and tls=verify-identity requires it"):
        SourceURL.parse(f"mysql://root@127.0.0.1:{mariadb.port}").connect()
    # ... and an account that requires TLS cannot be used with TLS disabled.
    with pytest.raises(ReplicationError, match="Access denied"):
        SourceURL.parse(_url(tls_server, tls="disabled")).connect()


def test_ed25519_account_replicates(make_mariadb, kafka) -> None:
    server = make_mariadb()
    server.execute("INSTALL SONAME 'auth_ed25519'")
    server.execute("CREATE USER ed_repl@'%' IDENTIFIED VIA ed25519 USING PASSWORD('Ed-Secret-7')")
    server.execute("GRANT REPLICATION SLAVE, BINLOG MONITOR, SELECT ON *.* TO ed_repl@'%'")
    server.execute("CREATE DATABASE e CHARACTER SET utf8mb4")
    server.execute("CREATE TABLE e.t (id INT PRIMARY KEY)")
    server.execute("INSERT INTO e.t VALUES (7), (8)")
    url = f"mysql://ed_repl:Ed-Secret-7@127.0.0.1:{server.port}?tls=disabled"
    assert main(["run", "--source", url, "--kafka", kafka.bootstrap, "--topic-prefix", "ed", "--server-id", "6102",
                 "--exit-at-end"]) == 0
    ids = sorted(r["after"]["id"] for ev in committed_events(kafka.bootstrap, "ed") if isinstance(ev, RowsEvent)
                 for r in ev.rows)
    assert ids == [7, 8]


def test_mysqls_auto_generated_certificate_names_no_host_and_the_error_says_verify_ca(mysql80) -> None:
    """Oracle MySQL 8.0 makes its own CA and server certificate at its first start, for no host name: verified
    against that CA by name (the default, tls=verify-identity), it is refused with one line that names the mode that
    verifies the CA alone; in that mode it connects over TLS."""
    ca = mysql80.datadir / "ca.pem"
    url = f"mysql://root@127.0.0.1:{mysql80.port}?tls-ca={ca}"
    with pytest.raises(ReplicationError) as refused:
        SourceURL.parse(url).connect()
    assert str(refused.value).count("\n") == 0 and "does not name 127.0.0.1" in str(refused.value), refused.value
    assert "set tls=verify-ca" in str(refused.value), refused.value
    with SourceURL.parse(f"{url}&tls=verify-ca").connect() as conn, conn.cursor() as cur:
        cur.execute("SHOW SESSION STATUS LIKE 'Ssl_version'")
        assert cur.fetchone()[1].startswith("TLS")
