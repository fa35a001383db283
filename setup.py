"""Build of the native extensions (JSONL emitter, routing core, row images to columns, Debezium row images,
text result rows); everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

_HEADERS = ["ingester/_crc32.h", "ingester/_bytes.h", "ingester/_json.h", "ingester/_module.h"]
setup(ext_modules=[
    Extension(name, [source], depends=_HEADERS + headers, extra_compile_args=["-O2"])
    for name, source, headers in (
        ("ingester.dump._native", "ingester/dump/_native.c", []),
        ("ingester.records._router", "ingester/records/_router.c", []),
        ("ingester.codec._columns", "ingester/codec/_columns.c", []),
        ("ingester.records.debezium._native", "ingester/records/debezium/_native.c",
         ["ingester/records/debezium/_values.h", "ingester/records/debezium/_envelope.h",
          "ingester/records/debezium/_avro.h"]),
        ("ingester.sources._textrows", "ingester/sources/_textrows.c", []))
])
