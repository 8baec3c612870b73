"""Coverage-guided fuzzing of the decoders that read untrusted bytes (see docs/reliability.md)."""
