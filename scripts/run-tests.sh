#!/usr/bin/env bash
# Fresh Debian 12 machine -> every test: install packages, build, run ctest (unit + integration).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure --timeout 600
