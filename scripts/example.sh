#!/usr/bin/env bash
# Set up (first run only) and run the main job on the bundled example checkpoint: the retained
# checkpoints that real Flink 1.20 wrote into fixtures/flink-1.20-default. Shows what they hold, then
# verifies all of them and says which one to restore and how.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
ensure_venv all
cd "$REPO"
ROOT="fixtures/flink-1.20-default/checkpoints/6ec13444f9e820ae37839598353ab359"
# Checkpoints of Flink < 2.0 store operator ids only; --uid hashes the uids as Flink does.
"$VENV/bin/repair" inspect "$ROOT" --uid per-user --uid per-account --uid records-seen
echo
exec "$VENV/bin/repair" fallback "$ROOT" "$@"
