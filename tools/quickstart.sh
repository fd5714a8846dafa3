#!/usr/bin/env bash
# Installs what is missing, builds saobp (Release) and runs the main job on the default data.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/deps.sh fortunes   # the default corpus: /usr/share/games/fortunes
bash tools/build.sh saobp     # the build test.sh uses too
./build/saobp info
# The main job: train the quickstart BERT (BP-High) on the fortunes corpus, then evaluate the
# checkpoint it wrote. Everything lands in runs/quickstart/.
./build/saobp train configs/quickstart.toml
./build/saobp eval --checkpoint runs/quickstart/final
