#!/usr/bin/env bash
# Set up (first run only) and run the main job on the bundled example checkpoint:
# inspect the retained checkpoints that real Flink 1.20 wrote into fixtures/flink-1.20-default.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv
cd "$REPO"
ROOT="fixtures/flink-1.20-default/checkpoints/6ec13444f9e820ae37839598353ab359"
# Checkpoints of Flink < 2.0 store operator ids only; --uid hashes the uids as Flink does.
exec "$VENV/bin/repair" inspect "$ROOT" --uid per-user --uid per-account --uid records-seen "$@"
