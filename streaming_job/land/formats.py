"""The lake's format, made once per job (``land.format``): Delta Lake (delta/format.py) or Apache Iceberg
(iceberg/format.py), each building its own parts from the land settings and the job's shared services. The
format-neutral Lander (sink.py) asks for it here and names no part of either."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..format.lake_format import FormatServices, FormatSettings, LakeFormat
from ..runtime.errors import LandError

if TYPE_CHECKING:
    from ..iceberg.catalog import IcebergCatalog
    from ..iceberg.maintenance import IcebergMaintenance


def make_format(settings: FormatSettings, services: FormatServices, catalog: IcebergCatalog | None = None,
                maintenance: IcebergMaintenance | None = None) -> LakeFormat:
    """The format ``settings.name`` names. Iceberg's: in the lake's ``catalog`` (built once by job.run, whose
    Spark session reads it too), with ``maintenance`` (land.iceberg_*; None: its defaults with land.compact_*)."""
    if settings.name == "iceberg":
        from ..iceberg.format import IcebergFormat

        if catalog is None:
            raise LandError("land.format iceberg: the lake's Iceberg catalog is needed")
        return IcebergFormat.build(settings, services, catalog, maintenance)
    from ..delta.format import DeltaFormat  # (land.format's default; the configuration knows no third)

    return DeltaFormat.build(settings, services)
