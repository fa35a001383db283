"""Coverage-guided fuzzing of the binlog codec (atheris/libFuzzer); see fuzz/README.md."""
