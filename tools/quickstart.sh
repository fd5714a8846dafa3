#!/usr/bin/env bash
# Installs what is missing, builds saobp (Release) and runs the main job on the default data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C build -j "$(nproc)" saobp
./build/saobp info
./build/saobp smoke
