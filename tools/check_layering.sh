#!/usr/bin/env bash
# The include rules of docs/architecture.md, checked (a CTest entry runs this):
# 1. Layers point down only: each folder of src/ includes only the folders listed for it below.
# 2. The device backends are kernel code's business: src/tensor/backend.h, src/tensor/checks.h,
#    src/tensor/cpu/, src/tensor/cuda/, src/attention/backend.h and src/attention/{cpu,cuda}/ are
#    included only by src/tensor/, by the kernel folders and files of src/attention/ (cpu/, cuda/,
#    dispatch.cpp, checks.cpp, backend.h), by the kernel tests of tests/tensor/ and by the CUDA
#    kernel emulator's files (tests/cuda_emu/).
# 3. Calls point down too: no object file of the library uses a symbol that an object of a folder
#    not below its own defines (a link-level cycle, which rule 1 cannot see when the caller
#    declares the function itself or a lower header declares what a higher folder defines).
#    Read with nm from the objects named, one per line, in the file of --objects (CMake writes
#    BUILD/saobp_lib_objects.txt; CTest passes it); a folder is the part of an object's path
#    after its last "/src/". Without --objects, BUILD = build/ when that file exists there, else
#    this rule is skipped (said on the last line).
# --root DIR checks the tree DIR instead of this checkout (tests/layering/planted.sh).
# Prints each violation as file:line (rule 3: file: symbol) and exits 1 if there is any.
set -euo pipefail
root="$(dirname "$0")/.."
objects=""
while (($#)); do
  case $1 in
    --root) root=$2 && shift 2 ;;
    --objects) objects=$2 && shift 2 ;;
    *) echo "usage: tools/check_layering.sh [--root DIR] [--objects FILE]" >&2 && exit 2 ;;
  esac
done
[[ -n $objects ]] && objects=$(realpath "$objects")
cd "$root"

declare -A below=(
  [core]=""
  [tensor]="core"
  [autograd]="core tensor"
  [attention]="core tensor autograd"
  [model]="core tensor autograd attention"
  [data]="core tensor"
  [tokenizer]="core tensor data"
  [dist]="core"
  [optim]="core tensor autograd dist"
  [train]="core tensor autograd attention model data tokenizer dist optim"
  [finetune]="core tensor autograd attention model data tokenizer dist optim train"
  [report]="core tensor autograd attention model data tokenizer dist optim train"
  [study]="core tensor autograd attention model data tokenizer dist optim train finetune"
)
bad=0
for dir in src/*/; do
  layer=$(basename "$dir")
  if [[ -z ${below[$layer]+set} ]]; then
    echo "src/$layer/: a folder with no place in tools/check_layering.sh's table of layers" >&2
    bad=1
    continue
  fi
  while IFS=: read -r file line inc; do
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$inc")
    [[ $target == "$layer" ]] && continue
    [[ " ${below[$layer]} " == *" $target "* ]] && continue
    echo "$file:$line: src/$layer/ includes src/$target/, which is not below it: $inc" >&2
    bad=1
  done < <(grep -rnE '^#include "[a-z_]+/' "$dir" || true)
done

kernel_only='#include "(tensor/(backend|checks)\.h|tensor/(cpu|cuda)/|attention/backend\.h|attention/(cpu|cuda)/)'
while IFS=: read -r file line inc; do
  case $file in
    src/tensor/* | src/attention/cpu/* | src/attention/cuda/*) continue ;;
    src/attention/dispatch.cpp | src/attention/checks.cpp | src/attention/backend.h) continue ;;
    tests/tensor/* | tests/cuda_emu/*) continue ;;
  esac
  echo "$file:$line: only kernel code includes the device backends: $inc" >&2
  bad=1
done < <(for d in src tools tests; do [[ -d $d ]] && grep -rnE "$kernel_only" "$d"; done || true)

symbols="calls not checked (no build: tools/build.sh writes build/saobp_lib_objects.txt)"
[[ -z $objects && -f build/saobp_lib_objects.txt ]] && objects=$PWD/build/saobp_lib_objects.txt
if [[ -n $objects ]]; then
  [[ -f $objects ]] || { echo "$objects: no such list of object files (build the library first)" >&2 && exit 1; }
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  for layer in "${!below[@]}"; do
    for b in $layer ${below[$layer]}; do echo "$layer $b"; done
  done >"$tmp/allowed"
  # Each object's external definitions (T, D, B, R: weak and inline ones are the include rule's
  # business) and the symbols it uses, as "symbol folder file".
  while read -r obj; do
    [[ -z $obj || $obj != */src/* ]] && continue
    [[ -f $obj ]] || { echo "$obj: missing (build the library first)" >&2 && exit 1; }
    rel=${obj##*/src/}
    file=src/${rel%.o}
    nm -g --defined-only "$obj" | awk -v l="${rel%%/*}" -v f="$file" '$2 ~ /^[TDBR]$/ {print $3, l, f}' >>"$tmp/defs"
    nm -u "$obj" | awk -v l="${rel%%/*}" -v f="$file" '{print $2, l, f}' >>"$tmp/uses"
  done <"$objects"
  touch "$tmp/defs" "$tmp/uses"
  while read -r file sym def; do
    echo "$file: calls $(c++filt "$sym"), defined in $def, which is not below it" >&2
    bad=1
  done < <(awk 'FILENAME == ARGV[1] {ok[$1 " " $2] = 1; next}
                FILENAME == ARGV[2] {layer[$1] = $2; file[$1] = $3; next}
                ($1 in layer) && !(($2 " " layer[$1]) in ok) {print $3, $1, file[$1]}' \
             "$tmp/allowed" "$tmp/defs" "$tmp/uses" | sort -u)
  symbols="every call points down"
fi

if ((bad)); then exit 1; fi
echo "layering: every include points down; the device backends are included by kernel code only; $symbols"
