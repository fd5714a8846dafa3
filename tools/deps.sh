#!/usr/bin/env bash
# Installs the Debian packages saobp builds with, when any is missing, plus any packages named
# as arguments (quickstart.sh adds `fortunes`, the default corpus). Run by test.sh and
# quickstart.sh; safe to run again (it only calls apt when something is absent).
set -euo pipefail

SAOBP_DEBIAN_PACKAGES=(
  build-essential cmake ninja-build pkg-config
  libeigen3-dev libfmt-dev libtomlplusplus-dev catch2 nlohmann-json3-dev libcli11-dev
  libutf8proc-dev libopenmpi-dev openmpi-bin libboost-math-dev libboost-context-dev
  ccache clang-format
  "$@"
)

missing=()
for p in "${SAOBP_DEBIAN_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "deps: installing ${missing[*]}"
  SUDO=""
  if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
