"""Kafka security: the daemon and `binlake consume` over TLS and SASL (PLAIN, SCRAM-SHA-256/512) against
a local KRaft broker with SASL_SSL and SSL listeners, certificates made here by `cryptography`. What the
consumer reads back over each equals the server's SELECT; a wrong SASL password is refused with a clear
error that does not show it."""

from __future__ import annotations

import datetime
import ipaddress
import os
import signal
import subprocess
import time

import orjson
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from kafka.admin import UserScramCredentialUpsertion

from ingester.devstack import free_tcp_port
from tests.harness.daemon import BINLAKE

pytestmark = pytest.mark.integration
USER, PASSWORD = "alice", "Kq9-broker-Secret-5150"


def _certificates(folder) -> tuple[str, str]:
    """(CA certificate file, broker key + certificate chain file), PEM, for 127.0.0.1 and localhost."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "binlake test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
          .not_valid_after(now + datetime.timedelta(days=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                        x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                           critical=False)
            .sign(ca_key, hashes.SHA256()))
    ca_file, broker_file = folder / "ca.pem", folder / "broker.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    broker_file.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        + cert.public_bytes(serialization.Encoding.PEM) + ca.public_bytes(serialization.Encoding.PEM))
    return str(ca_file), str(broker_file)


@pytest.fixture
def secure_kafka(make_kafka, tmp_path):
    """A broker with PLAINTEXT (for the harness), SSL and SASL_SSL (PLAIN and SCRAM) listeners."""
    ca, keystore = _certificates(tmp_path)
    ports = {"SSL": free_tcp_port(), "SASL_SSL": free_tcp_port()}
    plain_jaas = f'org.apache.kafka.common.security.plain.PlainLoginModule required user_{USER}="{PASSWORD}";'
    scram_jaas = "org.apache.kafka.common.security.scram.ScramLoginModule required;"
    broker = make_kafka(extra_listeners=ports, options={
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": keystore,
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
        "listener.name.sasl_ssl.plain.sasl.jaas.config": plain_jaas,
        "listener.name.sasl_ssl.scram-sha-256.sasl.jaas.config": scram_jaas,
        "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": scram_jaas,
    })
    admin = broker.admin()
    try:
        for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):  # one credential per request
            errors = admin.alter_user_scram_credentials([UserScramCredentialUpsertion(USER, mechanism, PASSWORD)])
            assert all(e is None for e in errors.values()), errors
    finally:
        admin.close()
    return ports, ca


def _start(args: list[str], env: dict[str, str], tmp_path, **kafka: object) -> subprocess.Popen:
    config = tmp_path / f"kafka-{len(list(tmp_path.iterdir()))}.yaml"
    config.write_text(orjson.dumps({"kafka": kafka}).decode())  # JSON is YAML
    return subprocess.Popen([*BINLAKE, args[0], "--config", str(config), *args[1:]], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd(), **env})


def _binlake(args: list[str], env: dict[str, str], tmp_path, **kafka: object) -> subprocess.CompletedProcess:
    proc = _start(args, env, tmp_path, **kafka)
    out, err = proc.communicate(timeout=180)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def test_daemon_and_consume_over_sasl_ssl_and_ssl(make_mariadb, secure_kafka, tmp_path) -> None:
    ports, ca = secure_kafka
    server = make_mariadb()
    server.execute("CREATE DATABASE k")
    server.execute("CREATE TABLE k.t (id INT PRIMARY KEY, v VARCHAR(10))")
    server.execute("INSERT INTO k.t VALUES (1, 'a'), (2, 'b'), (3, 'c')")
    server.execute("UPDATE k.t SET v = 'B' WHERE id = 2")
    server.execute("DELETE FROM k.t WHERE id = 3")
    password_file = tmp_path / "kafka-password"
    password_file.write_text(PASSWORD + "\n")
    sasl = {"bootstrap": f"127.0.0.1:{ports['SASL_SSL']}", "topic_prefix": "sec", "security_protocol": "SASL_SSL",
            "sasl_username": USER, "ssl_cafile": ca}
    run = _binlake(["run", "--source", server.url, "--exit-at-end"], {}, tmp_path,
                   sasl_mechanism="SCRAM-SHA-512", sasl_password_file=str(password_file), **sasl)
    assert run.returncode == 0, run.stderr[-3000:]
    assert PASSWORD not in run.stderr + run.stdout

    expected = {row[0]: row[1] for row in server.execute("SELECT id, v FROM k.t")}
    consumers = [
        ("SCRAM-SHA-256", {"BINLAKE_KAFKA_SASL_PASSWORD": PASSWORD}, dict(sasl, sasl_mechanism="SCRAM-SHA-256")),
        ("PLAIN", {}, dict(sasl, sasl_mechanism="PLAIN", sasl_password=PASSWORD)),
        ("SSL", {}, {"bootstrap": f"127.0.0.1:{ports['SSL']}", "topic_prefix": "sec", "security_protocol": "SSL",
                     "ssl_cafile": ca}),
    ]
    for name, env, kafka in consumers:
        done = _binlake(["consume", "--from-beginning", "--exit-at-end"], env, tmp_path, **kafka)
        assert done.returncode == 0, f"{name}: {done.stderr[-3000:]}"
        assert PASSWORD not in done.stderr
        rows: dict[int, str] = {}
        for line in done.stdout.splitlines():  # replay the changes: they give the server's rows
            ev = orjson.loads(line)
            for row in ev.get("rows", ()):
                if "after" in row:
                    rows[row["after"]["id"]] = row["after"]["v"]
                else:
                    rows.pop(row["before"]["id"])
        assert rows == expected, name


def test_wrong_sasl_password_or_unknown_ca_is_refused_clearly(make_mariadb, secure_kafka, tmp_path) -> None:
    ports, ca = secure_kafka
    server = make_mariadb()
    sasl = {"bootstrap": f"127.0.0.1:{ports['SASL_SSL']}", "topic_prefix": "sec", "security_protocol": "SASL_SSL",
            "sasl_username": USER, "sasl_mechanism": "SCRAM-SHA-256", "ssl_cafile": ca}
    wrong = "Kq9-wrong-Secret-0000"
    consume = ["consume", "--from-beginning", "--exit-at-end"]
    bad_password = _start(consume, {"BINLAKE_KAFKA_SASL_PASSWORD": wrong}, tmp_path, **sasl)
    # A broker certificate from a CA we were not given: refused, not trusted quietly.
    unknown_ca = _start(consume, {"BINLAKE_KAFKA_SASL_PASSWORD": PASSWORD}, tmp_path, **dict(sasl, ssl_cafile=None))
    # The daemon logs the refusal and retries (as for any Kafka outage) until asked to stop.
    daemon = _start(["run", "--source", server.url], {"BINLAKE_KAFKA_SASL_PASSWORD": wrong}, tmp_path, **sasl)
    _, err = bad_password.communicate(timeout=180)
    assert bad_password.returncode == 2, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("binlake: error: kafka 127.0.0.1:") and "uthentication" in last, last
    assert wrong not in err and "Traceback" not in err
    _, err = unknown_ca.communicate(timeout=180)
    assert unknown_ca.returncode == 2, err[-3000:]
    last = err.strip().splitlines()[-1]
    assert last.startswith("binlake: error: kafka 127.0.0.1:") and "CERTIFICATE_VERIFY_FAILED" in last, last
    # Stop it only once it has been refused and says it retries (its first attempt may still be under way).
    seen: list[str] = []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any("retrying" in line for line in seen):
        line = daemon.stderr.readline()
        if not line:
            break
        seen.append(line)
    daemon.send_signal(signal.SIGTERM)
    _, rest = daemon.communicate(timeout=60)
    err = "".join(seen) + rest
    assert daemon.returncode == 0, err[-3000:]
    assert "Authentication failed" in err and "retrying" in err and wrong not in err, err[-3000:]
