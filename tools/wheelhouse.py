#!/usr/bin/env python3
"""Build a wheelhouse for offline GPU nodes: the wheels gemmlab needs that a torch image lacks.

    python tools/wheelhouse.py --profile gpu-test --python-version 3.12 --dest .whl

GPU machines have torch, cuda-bindings, NVRTC and the CUDA runtime but no network, and the
device tool carries at most 64 MiB per call. So this downloads exactly the missing wheels
(``pip download --only-binary=:all: --platform manylinux... --no-deps``, versions pinned to
pyproject.toml's exact pins, else to what this environment was tested with), splits any wheel
larger than ``--split-mb`` into ``NAME.whl.part-aa``, ``-ab``... (``split -b``-style, joinable
with ``cat``), and writes ``install.sh``, which joins the parts, checks their SHA-256 and
installs everything with ``pip install --no-index --no-deps --target DIR``.
"""
from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import json
import re
import shlex
import shutil
import string
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

#: What pytest -m gpu needs beyond torch + cuda-bindings + nvrtc + cuda runtime (FACTS.md).
GPU_TEST = [
    # CuTe headers/pycute; CUDA headers CuTe needs; the CuTe DSL and its native libraries.
    "nvidia-cutlass", "nvidia-cuda-cccl", "nvidia-cuda-crt", "nvidia-cuda-nvdisasm",
    "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core",
    "nvidia-cutlass-dsl-libs-cu12", "protobuf", "typing-extensions",
    # IPython (magic tests), widgets, and running notebooks headless (nbclient + a kernel).
    "ipython", "ipython-pygments-lexers", "traitlets", "jedi", "parso", "prompt-toolkit", "wcwidth",
    "pygments", "matplotlib-inline", "pexpect", "ptyprocess", "stack-data", "asttokens", "executing",
    "pure-eval", "psutil",
    "ipywidgets", "widgetsnbextension", "jupyterlab-widgets", "comm",
    "nbformat", "fastjsonschema", "jsonschema", "jsonschema-specifications", "referencing", "rpds-py",
    "attrs", "nbclient", "jupyter-client", "jupyter-core", "platformdirs", "pyzmq", "tornado",
    "python-dateutil", "six", "ipykernel", "debugpy", "nest-asyncio2", "packaging",
    # tools/gpu_suite.sh spreads the GPU tests over processes (cold C++ compiles are ~20 s each).
    "pytest-xdist", "execnet",
]
#: The full course adds JupyterLab and nbgrader; their (many) dependencies are resolved by pip.
COURSE_EXTRA = ["jupyterlab", "notebook", "nbgrader", "nbconvert"]
#: Grading a class across GPUs (``python -m autograder grade --ray``) needs Ray; pip resolves its dependencies.
GRADE_EXTRA = ["ray"]
PROFILES = {"gpu-test": GPU_TEST, "gpu-grade": GPU_TEST + COURSE_EXTRA + GRADE_EXTRA, "course": GPU_TEST + COURSE_EXTRA}
#: Grading (``nbgrader autograde`` on a GPU node) never imports the browser front-ends, so the
#: ``gpu-grade`` profile drops them: about 35 MiB less to carry to an offline node.
UI_ONLY = {"jupyterlab", "notebook", "babel", "jupyterlab-server", "jupyter-lsp", "debugpy"}
DROPPED = {"gpu-test": set(), "gpu-grade": UI_ONLY, "course": set()}
#: Debian packages a profile carries too (``apt-get download``; install.sh unpacks them with
#: ``dpkg -x``): the grader sandboxes every submission with bubblewrap.
DEBS = {"gpu-test": [], "gpu-grade": ["bubblewrap"], "course": ["bubblewrap"]}
PLATFORMS = ["manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "linux_x86_64", "any"]
#: Already on the GPU image; never downloaded even when a resolved dependency names them.
ON_IMAGE = {"torch", "numpy", "cuda-bindings", "cuda-pathfinder", "cuda-python", "cuda-core",
            "nvidia-cuda-nvrtc", "nvidia-cuda-runtime", "triton", "matplotlib", "pytest", "setuptools", "pip"}


@dataclass(frozen=True)
class Item:
    requirement: str  # e.g. "nvidia-cutlass-dsl==4.8.1"
    resolve_deps: bool  # False: exactly this wheel (--no-deps)


#: The DSL's native libraries are released in lockstep with it and must carry its version.
LOCKSTEP = {"nvidia-cutlass-dsl-libs-base": "nvidia-cutlass-dsl", "nvidia-cutlass-dsl-libs-core": "nvidia-cutlass-dsl",
            "nvidia-cutlass-dsl-libs-cu12": "nvidia-cutlass-dsl"}
PYPROJECT = Path(__file__).resolve().parents[1] / "pyproject.toml"


def normalize(name: str) -> str:
    """A distribution name as pip compares them (PEP 503): ``Foo_Bar`` and ``foo-bar`` are one."""
    return re.sub(r"[-_.]+", "-", name).lower()


def project_pins(pyproject: Path = PYPROJECT) -> dict[str, str]:
    """The exact (``==``) pins in pyproject.toml: versions that must hold on every machine.

    Read with a pattern rather than tomllib so the script runs on Python 3.10 too.
    """
    text = pyproject.read_text() if pyproject.is_file() else ""
    return {normalize(m.group(1)): m.group(2) for m in re.finditer(r'"([A-Za-z0-9_.-]+)==([^";,\s]+)"', text)}


def pinned(name: str, pins: dict[str, str] | None = None) -> str:
    """``name==version``: the project's own pin, else the version installed here (what the tests
    ran with), else just the name (pip then takes the newest release, and main() warns)."""
    pins = project_pins() if pins is None else pins
    key = normalize(name)
    version = pins.get(key) or pins.get(LOCKSTEP.get(key, ""))
    if version is None:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return name
    return f"{name}=={version}"


def plan(profile: str) -> list[Item]:
    """The downloads for a profile: pinned, de-duplicated, in a stable order."""
    if profile not in PROFILES:
        raise SystemExit(f"unknown profile {profile!r}: choose one of {', '.join(PROFILES)}")
    seen: set[str] = set()
    items = []
    pins = project_pins()
    for name in PROFILES[profile]:
        key = normalize(name)
        if key in seen or key in ON_IMAGE:
            continue
        seen.add(key)
        items.append(Item(pinned(name, pins), resolve_deps=name in COURSE_EXTRA + GRADE_EXTRA))
    return items


def pip_command(items: list[Item], dest: Path, python_version: str, resolve: bool) -> list[str]:
    cmd = [sys.executable, "-m", "pip", "download", "--only-binary=:all:", "--dest", str(dest),
           "--python-version", python_version, "--implementation", "cp",
           "--abi", f"cp{python_version.replace('.', '')}", "--abi", "abi3", "--abi", "none"]
    for platform in PLATFORMS:
        cmd += ["--platform", platform]
    if not resolve:
        cmd.append("--no-deps")
    return cmd + [i.requirement for i in items]


def download(items: list[Item], dest: Path, python_version: str, drop: set[str] = frozenset()) -> None:
    dest.mkdir(parents=True, exist_ok=True)
    for resolve in (False, True):
        group = [i for i in items if i.resolve_deps == resolve]
        if group:
            subprocess.run(pip_command(group, dest, python_version, resolve), check=True)
    for wheel in dest.glob("*.whl"):  # resolved dependencies the image already has
        if wheel.name.split("-")[0].lower().replace("_", "-") in ON_IMAGE | drop:
            wheel.unlink()


def download_debs(packages: list[str], dest: Path) -> None:
    """``apt-get download`` each package into ``dest``; a warning where apt is missing."""
    if not packages:
        return
    if shutil.which("apt-get") is None:
        print(f"warning: no apt-get here, so {', '.join(packages)} is not in the wheelhouse; "
              "install it on the GPU node yourself", file=sys.stderr)
        return
    subprocess.run(["apt-get", "download", *packages], cwd=dest, check=True)


def part_suffixes():
    """aa, ab, ... az, ba, ... as ``split`` names its pieces."""
    for a in string.ascii_lowercase:
        for b in string.ascii_lowercase:
            yield a + b


def split_file(path: Path, part_bytes: int) -> list[Path]:
    """Cut ``path`` into ``path.part-aa``... of at most ``part_bytes`` each; the original is removed."""
    parts = []
    suffixes = part_suffixes()
    with path.open("rb") as src:
        while chunk := src.read(part_bytes):
            part = path.with_name(f"{path.name}.part-{next(suffixes)}")
            part.write_bytes(chunk)
            parts.append(part)
    path.unlink()
    return parts


def join_parts(target: Path) -> Path:
    """Inverse of :func:`split_file` (install.sh does the same with ``cat``)."""
    parts = sorted(target.parent.glob(f"{target.name}.part-*"))
    with target.open("wb") as out:
        for part in parts:
            out.write(part.read_bytes())
    return target


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def split_large(dest: Path, split_mb: float) -> dict[str, dict]:
    """Split every wheel over the limit; returns {wheel: {sha256, parts}} for install.sh."""
    limit = int(split_mb * 1024 * 1024)
    manifest = {}
    for wheel in sorted(dest.glob("*.whl")):
        if wheel.stat().st_size > limit:
            digest = sha256(wheel)
            parts = split_file(wheel, limit)
            manifest[wheel.name] = {"sha256": digest, "parts": [p.name for p in parts]}
    return manifest


INSTALL_SH = """#!/usr/bin/env bash
# Generated by tools/wheelhouse.py: install gemmlab's extra wheels on an offline machine.
#   bash install.sh [TARGET_DIR]    join split wheels, then pip install --no-index --no-deps --target
#   bash install.sh --join-only     only join (and verify) split wheels
set -euo pipefail
HERE="$(cd "$(dirname "${{BASH_SOURCE[0]}}")" && pwd)"
join() {{  # join NAME SHA256: cat NAME.part-* back into NAME and check it
  local name="$1" want="$2"
  if ls "$HERE/$name".part-* >/dev/null 2>&1; then
    cat "$HERE/$name".part-* > "$HERE/$name.tmp" && mv "$HERE/$name.tmp" "$HERE/$name"
  fi
  [ -f "$HERE/$name" ] || {{ echo "missing $name and its parts: carry all $name.part-* files" >&2; exit 1; }}
  local got; got="$(sha256sum "$HERE/$name" | cut -d' ' -f1)"
  [ "$got" = "$want" ] || {{ echo "$name: checksum mismatch (a part is missing or damaged)" >&2; exit 1; }}
}}
{joins}
[ "${{1:-}}" = "--join-only" ] && exit 0
TARGET="${{1:-$HERE/site}}"
PY="${{PYTHON:-python3}}"
"$PY" -m pip install --no-index --no-deps --target "$TARGET" "$HERE"/*.whl
for deb in "$HERE"/*.deb; do  # Debian packages (bubblewrap for the grader's sandbox)
  [ -e "$deb" ] && mkdir -p "$TARGET/debroot" && dpkg -x "$deb" "$TARGET/debroot"
done
echo "Installed into $TARGET. Use it with:"
echo "  export PYTHONPATH=$TARGET:$TARGET/nvidia_cutlass_dsl/dsl_packages:\\${{PYTHONPATH:-}}"
echo "  export PATH=$TARGET/bin:$TARGET/debroot/usr/bin:\\$PATH   # console scripts (alembic), bwrap"
"""


def write_install_script(dest: Path, manifest: dict[str, dict]) -> Path:
    joins = "\n".join(f"join {shlex.quote(name)} {info['sha256']}" for name, info in sorted(manifest.items()))
    script = dest / "install.sh"
    script.write_text(INSTALL_SH.format(joins=joins or ":"))
    script.chmod(0o755)
    (dest / "manifest.json").write_text(json.dumps(manifest, indent=1, sort_keys=True))
    return script


def carry_groups(dest: Path, carry_mb: float) -> list[Path]:
    """Hard-link the wheelhouse's files into ``dest/carry-1``, ``carry-2``... of at most
    ``carry_mb`` MiB each (largest files first), install.sh and the manifest in the last one.

    Why: a tool that ships files to a GPU node per call (64 MiB a call on ours) carries one
    group per call into the same folder there, then runs install.sh from it.
    """
    limit = int(carry_mb * 1024 * 1024)
    files = sorted((f for f in dest.iterdir() if f.is_file()), key=lambda f: -f.stat().st_size)
    last = {"install.sh", "manifest.json"}
    groups: list[list[Path]] = []
    sizes: list[int] = []
    for f in files:
        if f.name in last:
            continue
        size = f.stat().st_size
        if size > limit:
            raise SystemExit(f"{f.name} is {size / 2**20:.1f} MiB, over --carry-mb: lower --split-mb")
        for i, used in enumerate(sizes):
            if used + size <= limit:
                groups[i].append(f)
                sizes[i] += size
                break
        else:
            groups.append([f])
            sizes.append(size)
    tail = [dest / n for n in sorted(last) if (dest / n).exists()]
    if not groups or sizes[-1] + sum(f.stat().st_size for f in tail) > limit:
        groups.append([])
        sizes.append(0)
    groups[-1].extend(tail)
    out = []
    for i, group in enumerate(groups, 1):
        folder = dest / f"carry-{i}"
        if folder.exists():
            for old in folder.iterdir():
                old.unlink()
        folder.mkdir(exist_ok=True)
        for f in group:
            (folder / f.name).hardlink_to(f)
        out.append(folder)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--profile", choices=sorted(PROFILES), default="gpu-test")
    ap.add_argument("--python-version", default="3.12")
    ap.add_argument("--dest", type=Path, required=True)
    ap.add_argument("--split-mb", type=float, default=46.0, help="split wheels larger than this (MiB)")
    ap.add_argument("--plan", action="store_true", help="print the requirements and exit")
    ap.add_argument("--carry-mb", type=float, default=None,
                    help="also group the files into carry-1, carry-2... folders of at most this many MiB")
    args = ap.parse_args(argv)
    items = plan(args.profile)
    loose = [i.requirement for i in items if "==" not in i.requirement and not i.resolve_deps]
    if loose:
        shown = ", ".join(loose[:4]) + (", ..." if len(loose) > 4 else "")
        print(f"note: {len(loose)} wheels are not installed in this Python ({sys.executable}) and not pinned "
              f"in pyproject.toml, so their newest releases are taken ({shown}). Run this script with the "
              "project's .venv/bin/python to carry the versions the tests ran with.", file=sys.stderr)
    if args.plan:
        for i in items:
            print(i.requirement + ("  (with dependencies)" if i.resolve_deps else ""))
        return 0
    download(items, args.dest, args.python_version, DROPPED[args.profile])
    download_debs(DEBS[args.profile], args.dest)
    manifest = split_large(args.dest, args.split_mb)
    write_install_script(args.dest, manifest)
    files = sorted(p for p in args.dest.iterdir() if p.is_file())
    total = sum(p.stat().st_size for p in files)
    print(f"{len(files)} files, {total / 2**20:.1f} MiB in {args.dest}; largest "
          f"{max(p.stat().st_size for p in files) / 2**20:.1f} MiB")
    for name, info in manifest.items():
        print(f"  split {name} -> {', '.join(info['parts'])}")
    if args.carry_mb:
        for folder in carry_groups(args.dest, args.carry_mb):
            mib = sum(f.stat().st_size for f in folder.iterdir()) / 2**20
            print(f"  {folder.name}: {len(list(folder.iterdir()))} files, {mib:.1f} MiB")
        print("  carry each folder into one directory on the node, then run its install.sh")
    return 0


if __name__ == "__main__":
    sys.exit(main())
