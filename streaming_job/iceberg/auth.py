"""A REST Iceberg catalog's authentication (land.iceberg_catalog_token / _credential, docs/LAND.md, "Iceberg"):
a bearer token sent as is, or an OAuth2 client credential (``client_id:client_secret``) that the client exchanges
for a token at the catalog's token endpoint (``<uri>/v1/oauth/tokens``, or ``oauth2_uri``) with ``scope``.
pyiceberg's RestCatalog and Iceberg's Java REST catalog (Spark's) take the same property names for them
(``token``, ``credential``, ``scope``, ``oauth2-server-uri``). The secrets are never logged: not in the
configuration line (ingester.config.Config.redacted), and Spark's settings that hold them are redacted."""

from __future__ import annotations

from dataclasses import dataclass, field

from ingester.config import LandConfig

# Spark's own redaction (spark.redaction.regex, by default secret|password|token|access.key) with the credential
SPARK_REDACTION = r"(?i)secret|password|token|access[.]key|credential"


@dataclass(frozen=True)
class RestAuth:
    token: str | None = field(default=None, repr=False)
    credential: str | None = field(default=None, repr=False)
    scope: str | None = None
    oauth2_uri: str | None = None

    @classmethod
    def of(cls, land: LandConfig) -> RestAuth | None:
        """The configuration's (None: no authentication)."""
        token, credential = land.iceberg_catalog_auth()
        if token is None and credential is None and not land.iceberg_catalog_oauth2_uri:
            return None
        return cls(token, credential, land.iceberg_catalog_scope, land.iceberg_catalog_oauth2_uri)

    def properties(self) -> dict[str, str]:
        """The REST catalog's properties (pyiceberg's and Iceberg's Java client's names)."""
        found = {"token": self.token, "credential": self.credential, "scope": self.scope,
                 "oauth2-server-uri": self.oauth2_uri}
        return {k: v for k, v in found.items() if v}
