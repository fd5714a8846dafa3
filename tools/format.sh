#!/usr/bin/env bash
# Applies the checked-in .clang-format to every tracked C++ and CUDA source (tools/format.sh), or
# checks that none differs from it (tools/format.sh --check: lists the files and exits 1; test.sh
# runs this first). The style is clang-format 14's, the version Debian 12 ships.
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.inc' '*.cu' '*.cuh')
if [[ ${1:-} == --check ]]; then
  bad=()
  for f in "${files[@]}"; do
    clang-format --style=file "$f" | cmp -s - "$f" || bad+=("$f")
  done
  if ((${#bad[@]})); then
    echo "format: ${#bad[@]} file(s) differ from .clang-format; run tools/format.sh:" >&2
    printf '  %s\n' "${bad[@]}" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files match .clang-format"
else
  clang-format --style=file -i "${files[@]}"
fi
