"""Delta Lake as the lake's format (format.lake_format.LakeFormat)."""
