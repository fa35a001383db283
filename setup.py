"""Build of the native JSONL emitter; everything else is declared in pyproject.toml."""

from setuptools import Extension, setup

setup(ext_modules=[Extension("ingester.dump._native", ["ingester/dump/_native.c"], extra_compile_args=["-O2"])])
