#!/usr/bin/env bash
# Fresh Debian 12 machine -> running system: install packages, build, run the demo (scripts/demo.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# Only what the demo runs: the daemon and the CLI (the test command builds everything).
GDR_BUILD_TARGETS="gdrstored gdrctl" bash scripts/build.sh
bash scripts/demo.sh
