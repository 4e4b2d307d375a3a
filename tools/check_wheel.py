"""Checks that built wheels are what platforms with an old glibc can install.

    python tools/check_wheel.py dist/*.whl

For each wheel: the file name's tags equal the ``Tag:`` lines of its ``WHEEL`` file, the
tags are ``cp310-abi3-manylinux2014_<arch>`` (glibc 2.17, any CPython from 3.10), the
``METADATA`` asks for pyarrow only (the rest is in extras), and the extension module
inside is an ELF of that architecture whose versioned symbols need no glibc newer than
2.17 and which links no library outside the manylinux2014 set. ``readelf`` (binutils)
reads both architectures. Prints one line per wheel; exits 1 on the first problem.
"""

from __future__ import annotations

import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

MAX_GLIBC = (2, 17)
# Files beside the Python sources that the package reads at run time.
DATA_FILES = ("cdc_decode/fallback/subscribe.desc", "cdc_decode/spark/ivysettings.xml")
# ELF machine names as readelf prints them, per wheel architecture.
MACHINES = {"x86_64": "Advanced Micro Devices X86-64", "aarch64": "AArch64"}
# The libraries PEP 599 lets a manylinux2014 wheel link from the system.
ALLOWED_LIBS = {
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "libm.so.6",
    "libdl.so.2",
    "librt.so.1",
    "libc.so.6",
    "libnsl.so.1",
    "libutil.so.1",
    "libpthread.so.0",
    "libresolv.so.2",
    "libX11.so.6",
    "libXext.so.6",
    "libXrender.so.1",
    "libICE.so.6",
    "libSM.so.6",
    "libGL.so.1",
    "libgobject-2.0.so.0",
    "libgthread-2.0.so.0",
    "libglib-2.0.so.0",
    "ld-linux-x86-64.so.2",
    "ld-linux-aarch64.so.1",
}


def readelf(path: Path, *options: str) -> str:
    return subprocess.run(
        ["readelf", "-W", *options, str(path)], capture_output=True, text=True, check=True
    ).stdout


def check(wheel: Path) -> str:
    """What the wheel is, one line; raises ``ValueError`` naming the first problem."""
    name_tags = wheel.name[: -len(".whl")].split("-")[2:]
    python, abi, platforms = name_tags
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        tags = re.findall(r"^Tag: (\S+)$", archive.read(info).decode(), re.M)
        metadata = archive.read(info.replace("/WHEEL", "/METADATA")).decode()
        (module,) = [n for n in names if re.fullmatch(r"cdc_decode/_native.*\.so", n)]
        with tempfile.TemporaryDirectory() as tmp:
            so = Path(archive.extract(module, tmp))
            header = readelf(so, "-h")
            symbols = readelf(so, "--dyn-syms")
            needed = re.findall(r"\(NEEDED\).*\[(.+)\]", readelf(so, "-d"))
    expected = {f"{python}-{abi}-{p}" for p in platforms.split(".")}
    if set(tags) != expected:
        raise ValueError(f"{wheel.name}: WHEEL tags {tags} differ from the file name")
    arch = platforms.split(".")[0].removeprefix("manylinux2014_")
    if (python, abi) != ("cp310", "abi3") or arch not in MACHINES:
        raise ValueError(f"{wheel.name}: not a cp310-abi3-manylinux2014 wheel")
    if MACHINES[arch] not in header:
        raise ValueError(f"{wheel.name}: {module} is not an {arch} ELF")
    versions = {
        tuple(int(x) for x in v.split(".")) for v in re.findall(r"@GLIBC_([0-9.]+)", symbols)
    }
    newest = max(versions)
    if newest > MAX_GLIBC:
        too_new = sorted(set(re.findall(r"(\S+@GLIBC_2\.(?:1[89]|[2-9]\d)\S*)", symbols)))
        raise ValueError(f"{wheel.name}: needs glibc {newest}: {too_new[:10]}")
    absent = [f for f in DATA_FILES if f not in names]
    if absent:
        raise ValueError(f"{wheel.name}: lacks {absent}")
    outside = set(needed) - ALLOWED_LIBS
    if outside:
        raise ValueError(f"{wheel.name}: links {sorted(outside)}, outside manylinux2014")
    requires = re.findall(r"^Requires-Dist: (.+)$", metadata, re.M)
    plain = [r for r in requires if "extra ==" not in r]
    if [r.split(">")[0] for r in plain] != ["pyarrow"]:
        raise ValueError(f"{wheel.name}: requires {plain}, not only pyarrow")
    glibc = ".".join(map(str, newest))
    return (
        f"{wheel.name}: tags {', '.join(tags)}; {arch} ELF; newest glibc symbol {glibc}; "
        f"links {', '.join(sorted(needed))}; requires {', '.join(plain)}"
    )


def main(paths: list[str]) -> int:
    wheels = [Path(p) for p in paths if p.endswith(".whl")]
    if not wheels:
        print("no wheels given", file=sys.stderr)
        return 1
    for wheel in wheels:
        try:
            print(check(wheel))
        except ValueError as exc:
            print(f"FAIL {exc}", file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
