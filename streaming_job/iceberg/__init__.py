"""Apache Iceberg as the lake's format (format.lake_format.LakeFormat), its catalogs and its table maintenance."""
