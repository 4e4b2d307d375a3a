#!/usr/bin/env bash
# Runs the aarch64 wheel on an emulated aarch64 CPU (qemu-user): Debian 12's arm64
# Python 3.11 (its .debs unpacked into a folder, no system change), pyarrow's aarch64
# wheel and ours installed into a folder beside it; then every format's generated stream,
# decoded there, must equal the events the x86_64 side expects.
#
#   tools/aarch64/check.sh WHEEL WORK_DIR HOST_PYTHON
#
# Needs root for `apt-get install qemu-user` the first time; the arm64 package lists live
# in WORK_DIR/apt (a private apt state: the machine's own sources, arch arm64).
set -euo pipefail
wheel=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
work=$2
host_python=$3
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$work"
cd "$work"

command -v qemu-aarch64 >/dev/null || apt-get install -y -q qemu-user >/dev/null

if [ ! -x root/usr/bin/python3.11 ]; then
    mkdir -p apt/lists/partial apt/cache/archives/partial debs root
    touch apt/status
    apt=(-o Dir::State::Lists="$PWD/apt/lists" -o Dir::Cache="$PWD/apt/cache"
         -o Dir::State::status="$PWD/apt/status" -o APT::Architecture=arm64
         -o APT::Architectures::=arm64)
    apt-get "${apt[@]}" -q update >/dev/null
    (cd debs && apt-get "${apt[@]}" -q download python3.11-minimal libpython3.11-minimal \
        libpython3.11-stdlib libc6 zlib1g libexpat1 libffi8 libssl3 libstdc++6 libgcc-s1 \
        2>/dev/null)
    for deb in debs/*.deb; do dpkg -x "$deb" root; done
fi

pyarrow=$("$host_python" -c 'import pyarrow; print(pyarrow.__version__)')
rm -rf site
"$host_python" -m pip install --quiet --disable-pip-version-check --target site \
    --platform manylinux_2_28_aarch64 --platform manylinux2014_aarch64 \
    --only-binary=:all: --python-version 3.11 --implementation cp \
    "pyarrow==$pyarrow" "$wheel"

rm -rf streams
"$host_python" "$here/streams.py" write streams
PYTHONPATH=site qemu-aarch64 -L root root/usr/bin/python3.11 "$here/streams.py" check streams
