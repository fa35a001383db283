"""What to tell the user when the source refuses a connection: the server's error numbers, and a TLS handshake that
refused the server's certificate (each hint says what to do)."""

from __future__ import annotations

SERVER_HINTS = {
    1236: "the requested binlog position is not on the server (purged, or never existed): resume from a "
          "position it still has (SHOW BINARY LOGS) or take a new snapshot",
    1045: "check the user and password",
    1227: "the user needs the REPLICATION SLAVE privilege",
    1044: "the user needs the REPLICATION SLAVE privilege",
    1047: "the server does not implement this dump command: servers that only serve GTID dumps (e.g. Dolt) need "
          "source.resume: gtid",
}


def certificate_hint(error: str, host: str, tls_ca: str | None) -> str:
    """What to do about a server certificate the TLS handshake refused (``error``: the SSL error's text)."""
    if "mismatch" in error:  # the CA was accepted; the certificate names another host (or none)
        what = (f"it does not name {host} (MySQL's own auto-generated certificates name no host): connect by a name "
                "it holds, or set tls=verify-ca to verify its CA alone")
    elif tls_ca:
        what = (f"it is not signed by the CA in tls-ca={tls_ca} (give the CA that signed it), or choose a weaker tls "
                "mode explicitly")
    else:
        what = "give its CA with tls-ca=FILE, or choose a weaker tls mode explicitly"
    return f"the server's certificate was not accepted: {what}"
