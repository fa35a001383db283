"""Build of the native extensions (JSONL emitter, routing core); everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

_CRC = ["ingester/_crc32.h"]
setup(ext_modules=[
    Extension("ingester.dump._native", ["ingester/dump/_native.c"], depends=_CRC, extra_compile_args=["-O2"]),
    Extension("ingester.records._router", ["ingester/records/_router.c"], depends=_CRC, extra_compile_args=["-O2"]),
])
