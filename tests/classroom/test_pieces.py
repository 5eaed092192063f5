"""The class's pieces without a Hub: settings, passwords, the sandbox's command, collecting and feedback names."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from classroom.accounts import Accounts
from classroom.exchange import collect, feedback_name
from classroom.prepare import prepare_class, prepare_user
from classroom.sandbox import StudentBox, bwrap_command
from classroom.settings import ClassDir, ClassError, ClassSettings


def test_settings_refuse_what_the_hub_or_the_folders_would_not_take() -> None:
    with pytest.raises(ClassError, match="not usable on the Hub"):
        ClassSettings(students=["Alice Smith"], instructors=["t"])
    with pytest.raises(ClassError, match="both a student and an instructor"):
        ClassSettings(students=["ann"], instructors=["ann"])
    with pytest.raises(ClassError, match="at least one instructor"):
        ClassSettings(students=["ann"], instructors=[])
    with pytest.raises(ClassError, match="registration"):
        ClassSettings(students=[], instructors=[], auth="lti")
    with pytest.raises(ClassError, match="pool must be one of gpu, off, not 'fake'"):
        ClassSettings(students=["ann"], instructors=["tom"], pool="fake")      # a class's pool judges on GPUs
    with pytest.raises(ClassError, match="pool_program"):
        ClassSettings(students=["ann"], instructors=["tom"], pool_program=[])
    s = ClassSettings(students=["ann"], instructors=["tom"], pool="off", pool_program=["pool_service.py"])
    assert ClassSettings.from_dict(json.loads(s.to_json())) == s
    assert ClassSettings(students=[], instructors=["tom"]).pool_program == ["-m", "pool"]


def test_the_pool_command_is_the_hubs_with_ray_off_unless_the_class_chose_ray() -> None:
    here = ClassSettings(students=[], instructors=["tom"], pool_args=["--concurrent-jobs", "3"])
    assert here.pool_command("py", "--check") == ["py", "-m", "pool", "serve", "--hub", "--check", "--ray", "off",
                                                  "--concurrent-jobs", "3"]
    ray = ClassSettings(students=[], instructors=["tom"], pool_args=["--ray", "auto"], pool_program=["svc.py"])
    assert ray.pool_command("py", "--port", "9") == ["py", "svc.py", "serve", "--hub", "--port", "9", "--ray", "auto"]


def test_a_class_whose_pool_cannot_start_is_not_started(tmp_path: Path) -> None:
    """``--pool gpu`` on a host without a GPU: the Hub is not started, and the instructor reads why and what to do
    (before, the Hub started, the pool exited, and the reason was only in the Hub's log)."""
    import subprocess
    import sys

    from tests.classroom.running import class_env, prepare
    from tests.support import ROOT

    pytest.importorskip("jupyterhub", reason="pip install -e '.[class]' (scripts/setup.sh --class)")
    root = tmp_path / "class"
    prepare(root, ["ann"], ["tom"], pool="gpu")
    settings = json.loads((root / "class.json").read_text())
    settings["pool_args"] = ["--no-sandbox"]       # the GPU, not this host's bubblewrap, is what is missing
    (root / "class.json").write_text(json.dumps(settings))
    try:
        done = subprocess.run([sys.executable, "-m", "classroom", "start", str(root)], cwd=ROOT,
                              env={**class_env(), "CUDA_VISIBLE_DEVICES": ""}, capture_output=True, text=True,
                              timeout=240)
    except subprocess.TimeoutExpired:
        pytest.fail("the Hub started although its pool cannot")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the GPU pool cannot start here, so the Hub was not started" in done.stderr
    assert "no GPU is visible on this host" in done.stderr and "--pool off" in done.stderr


def test_passwords_verify_only_for_their_user_and_can_be_replaced() -> None:
    accounts = Accounts()
    first = accounts.issue(["ann", "bo"])
    assert accounts.verify("ann", first["ann"]) and not accounts.verify("bo", first["ann"])
    assert not accounts.verify("eve", first["ann"]) and not accounts.verify("ann", "")
    again = accounts.issue(["ann"])
    assert not accounts.verify("ann", first["ann"]) and accounts.verify("ann", again["ann"])
    accounts.keep_only(["bo"])
    assert not accounts.verify("ann", again["ann"]) and accounts.verify("bo", first["bo"])


def test_a_students_sandbox_binds_their_folders_and_no_one_elses(tmp_path: Path) -> None:
    where = ClassDir(tmp_path / "class")
    settings = ClassSettings(students=["ann", "bo"], instructors=["tom"])
    prepare_class(where, settings)
    home = prepare_user(where, "ann", False)
    prepare_user(where, "bo", False)
    box = StudentBox(home, rw={str(where.inbound): str(where.handins("ann"))},
                     ro={str(where.outbound): str(where.outbound), str(where.exchange_feedback): str(where.feedback("ann"))},
                     env={"JUPYTERHUB_USER": "ann"})
    cmd = bwrap_command(box, ["jupyterhub-singleuser"])
    text = " ".join(cmd)
    assert "/bo" not in text and str(where.course) not in text and str(where.hub) not in text
    assert ["--bind", str(where.handins("ann")), str(where.inbound)] == cmd[cmd.index(str(where.handins("ann"))) - 1:
                                                                          cmd.index(str(where.handins("ann"))) + 2]
    assert "--clearenv" in cmd and "--unshare-pid" in cmd and cmd[-1] == "jupyterhub-singleuser"
    assert not any(a.startswith("/dev/nvidia") for a in cmd)
    assert os.stat(where.hub).st_mode & 0o777 == 0o700 and os.stat(where.course).st_mode & 0o777 == 0o700


def _handin(folder: Path, name: str, notebook: str = "{}", secret: str = "s3") -> Path:
    entry = folder / name
    entry.mkdir(parents=True)
    (entry / "02_tiled_copy.ipynb").write_text(notebook)
    (entry / "timestamp.txt").write_text(name.split("+")[2])
    (entry / "submission_secret.txt").write_text(secret)
    return entry


def test_collect_takes_each_students_newest_regular_files_as_the_folder_owners(tmp_path: Path) -> None:
    where = ClassDir(tmp_path / "class")
    prepare_class(where, ClassSettings(students=["ann", "bo"], instructors=["tom"]))
    _handin(where.handins("ann"), "ann+02_tiled_copy+2026-01-01 10:00:00.000000 UTC+a", '{"old": 1}')
    _handin(where.handins("ann"), "ann+02_tiled_copy+2026-01-02 10:00:00.000000 UTC+b", '{"new": 1}')
    _handin(where.handins("bo"), "ann+02_tiled_copy+2026-01-03 10:00:00.000000 UTC+c", '{"bo": 1}')   # bo, posing
    link = where.handins("bo") / "bo+02_tiled_copy+2099-01-01 00:00:00.000000 UTC+d"
    link.symlink_to(where.course / "solutions" / "02_tiled_copy")
    report = collect(where, "02_tiled_copy")
    assert report.collected == ["ann", "bo"]
    submitted = where.course / "autograder" / "submitted"
    assert json.loads((submitted / "ann" / "02_tiled_copy" / "02_tiled_copy.ipynb").read_text()) == {"new": 1}
    assert json.loads((submitted / "bo" / "02_tiled_copy" / "02_tiled_copy.ipynb").read_text()) == {"bo": 1}
    assert any("names 'ann'; it is bo's" in n for n in report.notes)
    assert any("not a folder (a link?)" in n for n in report.notes)


def test_feedback_names_are_the_ones_nbgraders_fetch_feedback_computes() -> None:
    from nbgrader.utils import notebook_hash

    assert feedback_name("abc", "02_tiled_copy.ipynb") == notebook_hash(secret="abc", notebook_id="02_tiled_copy") + ".html"
