#!/usr/bin/env bash
# saobp's build dependencies for a machine with no network (GPU nodes often are offline).
#
#   tools/offline_deps.sh fetch [--mpi] [--runtime] [DIR]
#                                              on a connected Debian 12 machine: `apt-get download`
#                                              the Debian packages the build needs into DIR
#                                              (default .deps/, git-ignored; about 12 MB);
#                                              --runtime: only the libraries a saobp built here
#                                              loads (under 1 MB; 7 MB with --mpi), for carrying
#                                              binaries rather than building on the GPU node
#   tools/offline_deps.sh unpack [DIR] PREFIX  on the offline machine: `dpkg -x` every package of
#                                              DIR into PREFIX (never into /), then print the
#                                              environment that points CMake and pkg-config there
#   tools/offline_deps.sh env PREFIX           print that environment again (eval it)
#
# tools/gpu_check.sh does the unpack and the build itself; this script is its first half. What
# is gathered: the headers and libraries tools/deps.sh installs (Eigen, fmt, toml++, Catch2 v2,
# nlohmann-json, CLI11, utf8proc, Boost.Math, and Boost.Context, which the tests' CUDA kernel
# emulator links statically), their runtime libraries, and pkgconf (CMake finds
# toml++ and utf8proc through pkg-config). The compiler, CMake, ninja, OpenMP (libgomp comes with
# GCC) and the CUDA toolkit are the offline machine's own. With --mpi, `fetch` adds Open MPI
# and the libraries it loads, for `mpirun -np 2` on the GPU node (about 8 MB more); a relocated
# Open MPI needs OPAL_PREFIX, which `env` prints.
set -euo pipefail
cd "$(dirname "$0")/.."

packages=(
  libeigen3-dev catch2 nlohmann-json3-dev libcli11-dev
  libfmt-dev libfmt9 libtomlplusplus-dev libtomlplusplus3 libutf8proc-dev libutf8proc2
  libboost-math-dev libboost1.74-dev libboost-context-dev libboost-context1.74-dev
  pkgconf pkgconf-bin libpkgconf3
)
mpi_packages=(
  libopenmpi-dev libopenmpi3 openmpi-bin openmpi-common libpmix2 libhwloc15 libevent-core-2.1-7
  libevent-pthreads-2.1-7 libfabric1 libucx0 libibverbs1 librdmacm1 libpsm2-2 libpsm-infinipath1
  libnl-3-200 libnl-route-3-200 libnuma1 libltdl7 libmunge2 libgfortran5 libpciaccess0 libxnvctrl0
  libudev1
)
arch=x86_64-linux-gnu

usage() {
  sed -n '4,14p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

print_env() {
  local p
  p=$(cd "$1" && pwd)
  [[ -d $p/usr/lib ]] || {
    echo "offline_deps: $p holds no unpacked packages (run: tools/offline_deps.sh unpack DIR $1)" >&2
    exit 1
  }
  echo "export CMAKE_PREFIX_PATH=$p/usr\${CMAKE_PREFIX_PATH:+:\$CMAKE_PREFIX_PATH}"
  echo "export PKG_CONFIG_LIBDIR=$p/usr/lib/$arch/pkgconfig:$p/usr/share/pkgconfig"
  # The .pc files say prefix=/usr: the sysroot puts PREFIX in front of their -I and -L paths.
  echo "export PKG_CONFIG_SYSROOT_DIR=$p"
  echo "export PKG_CONFIG=$p/usr/bin/pkgconf"
  echo "export LD_LIBRARY_PATH=$p/usr/lib/$arch\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
  if [[ -x $p/usr/bin/mpirun ]]; then
    echo "export OPAL_PREFIX=$p/usr PATH=$p/usr/bin:\$PATH"
    # Its plugins from the prefix too: a machine with an Open MPI of its own would lend its plugins
    # (built against another PMIx) to the relocated one.
    echo "export OMPI_MCA_mca_base_component_path=$p/usr/lib/$arch/openmpi/lib/openmpi3"
    echo "export LD_LIBRARY_PATH=$p/usr/lib/$arch/openmpi/lib:\$LD_LIBRARY_PATH"
  fi
}

cmd=${1:-}
shift || true
case $cmd in
  fetch)
    mpi=0 runtime=0
    while [[ ${1:-} == --* ]]; do
      case $1 in
        --mpi) mpi=1 ;;
        --runtime) runtime=1 ;;
        *) usage ;;
      esac
      shift
    done
    dir=${1:-.deps}
    mkdir -p "$dir"
    list=("${packages[@]}")
    ((mpi)) && list+=("${mpi_packages[@]}")
    if ((runtime)); then  # only what a prebuilt saobp loads: no headers, no pkg-config
      mapfile -t list < <(printf '%s\n' "${list[@]}" | grep -v -E -- '-dev$|^catch2$|^pkgconf|^libpkgconf')
    fi
    (cd "$dir" && apt-get download "${list[@]}" 2>&1 | grep -v '^W: Download is performed unsandboxed' || true)
    n=$(find "$dir" -maxdepth 1 -name '*.deb' | wc -l)
    ((n >= ${#list[@]})) || {
      echo "offline_deps: $dir holds $n packages of the ${#list[@]} asked for (apt-get update first?)" >&2
      exit 1
    }
    echo "offline_deps: $n packages in $dir ($(du -sh "$dir" | cut -f1)); copy the folder to the offline machine"
    ;;
  unpack)
    (($# >= 1)) || usage
    if (($# == 1)); then dir=.deps prefix=$1; else dir=$1 prefix=$2; fi
    [[ $(cd "$(dirname "$prefix")" 2>/dev/null && pwd)/$(basename "$prefix") != / ]] || {
      echo "offline_deps: refusing to unpack into /" >&2
      exit 1
    }
    shopt -s nullglob
    debs=("$dir"/*.deb)
    ((${#debs[@]})) || {
      echo "offline_deps: no .deb files in $dir (run tools/offline_deps.sh fetch on a connected machine)" >&2
      exit 1
    }
    mkdir -p "$prefix"
    for d in "${debs[@]}"; do
      if command -v dpkg >/dev/null; then
        dpkg -x "$d" "$prefix"
      else  # a .deb is an ar archive holding data.tar.*
        tmp=$(mktemp -d)
        (cd "$tmp" && ar x "$(cd "$OLDPWD" && realpath "$d")")
        tar -xf "$tmp"/data.tar.* -C "$prefix"
        rm -rf "$tmp"
      fi
    done
    # The names Debian's alternatives would give Open MPI's launchers (dpkg -x makes no links).
    for n in mpirun mpiexec; do
      [[ -e $prefix/usr/bin/$n.openmpi && ! -e $prefix/usr/bin/$n ]] && ln -s "$n.openmpi" "$prefix/usr/bin/$n"
    done
    echo "offline_deps: ${#debs[@]} packages unpacked into $prefix" >&2
    print_env "$prefix"
    ;;
  env)
    (($# == 1)) || usage
    print_env "$1"
    ;;
  *) usage ;;
esac
