"""flink-checkpoint-repair: read, verify, repair and export Flink RocksDB checkpoints without a JVM."""

__version__ = "0.1.0"
