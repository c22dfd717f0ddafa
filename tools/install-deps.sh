#!/bin/sh
# Installs the Debian packages w8a8 needs to build and test, when they are missing.
# Runs apt-get only as root and only for what is absent; otherwise prints what to install.
pkgs="build-essential libomp-dev clang libclang-rt-dev openmpi-bin libopenmpi-dev libdnnl-dev libopenblas-dev pkg-config cmake python3-numpy python3-venv python3-setuptools python3-wheel"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if ! command -v apt-get >/dev/null 2>&1; then
  echo "install-deps: not a Debian system; please install:$missing" >&2
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "install-deps: missing packages:$missing (run as root, or: sudo apt-get install$missing)" >&2
  exit 0
fi
echo "install-deps: installing$missing"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q >/dev/null 2>&1 || true
apt-get install -y -q --no-install-recommends $missing >/dev/null || { echo "install-deps: apt-get failed" >&2; exit 1; }
