"""tools/wheelhouse.py's pure parts: the plan, the pip command, splitting and joining (no downloads)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import ROOT
spec = importlib.util.spec_from_file_location("wheelhouse", ROOT / "tools" / "wheelhouse.py")
wheelhouse = importlib.util.module_from_spec(spec)
sys.modules["wheelhouse"] = wheelhouse
spec.loader.exec_module(wheelhouse)


def test_gpu_test_plan_has_the_dsl_and_headers_pinned_and_nothing_the_image_has() -> None:
    reqs = [i.requirement for i in wheelhouse.plan("gpu-test")]
    names = [r.split("==")[0] for r in reqs]
    for needed in ("nvidia-cutlass", "nvidia-cuda-cccl", "nvidia-cuda-crt", "nvidia-cutlass-dsl",
                   "nvidia-cutlass-dsl-libs-base", "nvidia-cutlass-dsl-libs-core", "nvidia-cutlass-dsl-libs-cu12",
                   "protobuf", "ipywidgets", "nbclient", "ipykernel"):
        assert needed in names
    assert "nvidia-cutlass-dsl==4.8.1" in reqs and "nvidia-cuda-cccl==13.0.85" in reqs
    assert not set(names) & wheelhouse.ON_IMAGE
    assert len(names) == len(set(names))
    assert all(not i.resolve_deps for i in wheelhouse.plan("gpu-test"))


def test_project_pins_hold_where_nothing_is_installed(monkeypatch: pytest.MonkeyPatch) -> None:
    # A cluster login node's bare Python: CCCL must still be 13.0 (13.3 breaks the CuTe headers),
    # and the DSL's native libraries must carry the DSL's own version.
    def not_installed(name: str) -> str:
        raise wheelhouse.importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(wheelhouse.importlib.metadata, "version", not_installed)
    reqs = {i.requirement.split("==")[0]: i.requirement for i in wheelhouse.plan("gpu-test")}
    assert reqs["nvidia-cuda-cccl"] == "nvidia-cuda-cccl==13.0.85"
    assert reqs["nvidia-cuda-crt"] == "nvidia-cuda-crt==13.0.88"
    assert reqs["nvidia-cutlass"] == "nvidia-cutlass==4.2.0.0"
    dsl = wheelhouse.project_pins()["nvidia-cutlass-dsl"]
    for lib in ("base", "core", "cu12"):
        assert reqs[f"nvidia-cutlass-dsl-libs-{lib}"] == f"nvidia-cutlass-dsl-libs-{lib}=={dsl}"
    assert reqs["ipywidgets"] == "ipywidgets"          # no pin anywhere: pip takes the newest


def test_project_pins_read_only_exact_pins(tmp_path: Path) -> None:
    toml = tmp_path / "pyproject.toml"
    toml.write_text('dependencies = [\n  "a-b==1.2.3",\n  "c>=2",\n  "D_e==4.0", # note\n]\n')
    assert wheelhouse.project_pins(toml) == {"a-b": "1.2.3", "d-e": "4.0"}
    assert wheelhouse.pinned("d.E", wheelhouse.project_pins(toml)) == "d.E==4.0"


def test_course_plan_resolves_jupyter_and_nbgrader() -> None:
    items = {i.requirement.split("==")[0]: i for i in wheelhouse.plan("course")}
    assert items["nbgrader"].resolve_deps and items["jupyterlab"].resolve_deps
    assert not items["nvidia-cutlass-dsl"].resolve_deps
    with pytest.raises(SystemExit):
        wheelhouse.plan("nonsense")


def test_pip_command_targets_the_gpu_python() -> None:
    cmd = wheelhouse.pip_command(wheelhouse.plan("gpu-test")[:2], Path("/tmp/w"), "3.12", resolve=False)
    joined = " ".join(cmd)
    assert "download --only-binary=:all:" in joined and "--no-deps" in cmd
    assert "--python-version 3.12" in joined and "--abi cp312" in joined
    assert "--platform manylinux_2_28_x86_64" in joined


def test_split_and_join_roundtrip_in_python(tmp_path: Path) -> None:
    data = os.urandom(2_500_000)
    wheel = tmp_path / "big-1.0-py3-none-any.whl"
    wheel.write_bytes(data)
    (tmp_path / "small-1.0-py3-none-any.whl").write_bytes(b"tiny")
    manifest = wheelhouse.split_large(tmp_path, split_mb=1.0)
    assert list(manifest) == [wheel.name]
    assert manifest[wheel.name]["parts"] == [f"{wheel.name}.part-{s}" for s in ("aa", "ab", "ac")]
    assert not wheel.exists()
    assert all((tmp_path / p).stat().st_size <= 1024 * 1024 for p in manifest[wheel.name]["parts"])
    assert wheelhouse.join_parts(wheel).read_bytes() == data


def test_install_script_joins_and_verifies(tmp_path: Path) -> None:
    data = os.urandom(3_000_000)
    wheel = tmp_path / "big-1.0-py3-none-any.whl"
    wheel.write_bytes(data)
    manifest = wheelhouse.split_large(tmp_path, split_mb=1.0)
    script = wheelhouse.write_install_script(tmp_path, manifest)
    run = subprocess.run(["bash", str(script), "--join-only"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr
    assert wheel.read_bytes() == data
    # A damaged part must be refused, not installed.
    wheel.unlink()
    part = tmp_path / manifest[wheel.name]["parts"][1]
    part.write_bytes(part.read_bytes()[:-1])
    run = subprocess.run(["bash", str(script), "--join-only"], capture_output=True, text=True)
    assert run.returncode != 0 and "checksum mismatch" in run.stderr


def test_carry_groups_fit_the_limit_and_end_with_the_installer(tmp_path: Path) -> None:
    sizes = {"a.whl": 50, "b.whl.part-aa": 40, "b.whl.part-ab": 30, "c.whl": 25, "d.whl": 5}
    for name, mib in sizes.items():
        (tmp_path / name).write_bytes(b"x" * (mib * 1024))  # KiB stand in for MiB below
    (tmp_path / "install.sh").write_text("#!/bin/sh\n")
    (tmp_path / "manifest.json").write_text("{}")
    groups = wheelhouse.carry_groups(tmp_path, 60 / 1024)  # 60 KiB
    names = [sorted(f.name for f in g.iterdir()) for g in groups]
    assert sorted(n for g in names for n in g) == sorted([*sizes, "install.sh", "manifest.json"])
    for g in groups:
        assert sum(f.stat().st_size for f in g.iterdir()) <= 60 * 1024
    assert "install.sh" in names[-1] and "manifest.json" in names[-1]
    with pytest.raises(SystemExit, match="over --carry-mb"):
        wheelhouse.carry_groups(tmp_path, 40 / 1024)
