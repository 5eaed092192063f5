"""A class in a real browser: JupyterHub, nbgrader's Assignments tab, the formgrader and the GPU pool, driven by
Playwright in Debian's headless Chromium (tests/support/browser.py; Playwright's own browsers are never used).

The instructor releases 02 (``python -m classroom release``, as the README's class section runs it) and sees it
in the formgrader; two students log in through the Hub's login page, fetch 02 from the Assignments tab, type
their answer (honest, hostile) and submit it; the hostile one also probes the class from a notebook and forges a
hand-in named for a classmate; the third (wrong) works from his server's command line instead, with the nbgrader
commands behind the Assignments tab (fetch_assignment, submit, fetch_feedback); a student without a GPU checks a
kernel on the pool from a notebook with no token set; the instructor grades (``python -m classroom grade``:
collect, autograde with the judge, feedback, exports) and sees the three scores in the formgrader; each student
fetches their feedback, which holds their score; the Canvas and Moodle files hold the three grades. Without a
GPU, 02's two GPU tests are "not graded" (5 of its 8 points) and ``grade`` exits 1 saying so. The pool runs the
fake judge here (no GPU); the GPU run is ``pytest -m gpu tests/pool/test_notebook_through_pool.py``. Where no
browser test can run, tests/classroom/test_exchange.py takes the same class through the command line alone.
Screenshots of every step go to ``$GEMMLAB_ARTIFACTS/class`` (default ``test-artifacts/class``).
"""
from __future__ import annotations

import concurrent.futures
import contextlib
import csv
import io
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.classroom.running import HubUser, RunningClass, class_env, require_class_tools, running_class
from tests.classroom.work import ASSIGNMENT, CHECK, FORGE, HOSTILE, NOTEBOOK, answer, edit, nbgrader
from tests.support import ROOT
from tests.support.browser import artifacts, require_browser

pytest.importorskip("jupyterhub", reason="the `class` extra: pip install -e '.[class]'")
pytestmark = [pytest.mark.browser, pytest.mark.slow]
STUDENTS = {"alice": "honest", "bob": "wrong", "carol": "hostile"}
#: Works from the command line in his own server (nbgrader's commands), not in the browser.
ON_THE_COMMAND_LINE = "bob"
SCORES = {"alice": "3", "bob": "0", "carol": "0"}
UI_MS = 120_000
RUN_MS = 400_000


@pytest.fixture(scope="module")
def shots() -> Path:
    return artifacts("class")


@pytest.fixture(scope="module")
def klass(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningClass]:
    require_browser()
    require_class_tools()
    with running_class(tmp_path_factory.mktemp("class-browser") / "class", list(STUDENTS), ["teacher"]) as running:
        yield running


@pytest.fixture(scope="module")
def browser(klass: RunningClass):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=require_browser(), headless=True)
        yield b
        b.close()


class Step:
    """Screenshots numbered in the order the class happens; the last one is taken when a step fails."""

    def __init__(self, folder: Path) -> None:
        self.folder, self.n = folder, 0

    def shot(self, page, name: str) -> None:
        self.n += 1
        try:
            page.screenshot(path=str(self.folder / f"{self.n:02d}-{name}.png"))
        except Exception as exc:  # a screenshot never hides the real failure
            print(f"screenshot {name} failed: {exc}")

    @contextlib.contextmanager
    def failing(self, page, name: str):
        try:
            yield
        except BaseException:
            self.shot(page, f"{name}-FAILED")
            raise


def _on_the_command_line(user: HubUser, code: str) -> dict[str, str]:
    """``user.run(code)`` in a thread of its own: Playwright's sync API keeps an event loop running in this one."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(user.run, code).result()


def _classroom(*args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "classroom", *args], cwd=ROOT, env=class_env(), capture_output=True,
                          text=True, timeout=1800)
    return f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"


# --------------------------------------------------------------------------- JupyterLab through the Hub

def _login(browser, klass: RunningClass, user: str):
    context = browser.new_context(viewport={"width": 1400, "height": 950})
    page = context.new_page()
    page.set_default_timeout(UI_MS)
    page.goto(f"{klass.url}/hub/login")
    page.fill("#username_input", user)
    page.fill("#password_input", klass.passwords[user])
    return context, page


def _lab_ready(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Nbgrader$")).wait_for(timeout=RUN_MS)


def _menu(page, *labels: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(labels[0])}$")).click()
    for label in labels[1:]:
        page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}$")).first.click()


def _assignments(page) -> None:
    _menu(page, "Nbgrader", "Assignment List")
    page.locator("#released_assignments_list, #fetched_assignments_list").first.wait_for(timeout=UI_MS)


def _row_button(page, list_id: str, text: str):
    row = page.locator(f"#{list_id} .list_item", has_text=ASSIGNMENT).first
    row.wait_for(timeout=UI_MS)
    return row.get_by_role("button", name=text)


def _type_cell(page, cell, text: str) -> None:
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.press("Delete")
    page.keyboard.insert_text(text)
    page.keyboard.press("Escape")


def _new_notebook_runs(page, code: str, until: str) -> str:
    """A new notebook from the Launcher's Python card (no kernel dialog), ``code`` in its first cell, run; the
    cell's output once it shows ``until``."""
    _menu(page, "File", "New Launcher")
    page.locator('.jp-LauncherCard[data-category="Notebook"]').first.click()
    cell = page.locator(".jp-NotebookPanel:visible .jp-CodeCell").first
    cell.wait_for(timeout=UI_MS)
    # A cell run before the new notebook's kernel is connected is not run at all: wait for it.
    page.locator('.jp-NotebookPanel:visible .jp-Notebook-ExecutionIndicator[data-status="idle"]').wait_for(
        timeout=RUN_MS)
    _type_cell(page, cell, code)
    prompt = cell.locator(".jp-InputArea-prompt")
    for _ in range(6):   # a run sent while the kernel's connection is still settling is dropped: send it again
        cell.locator(".cm-content").click()
        page.keyboard.press("Control+Enter")
        with contextlib.suppress(Exception):
            page.wait_for_function("(p) => !/^\\[ \\]:$/.test(p.textContent.trim())", arg=prompt.element_handle(),
                                   timeout=20_000)
            break
    output = cell.locator(".jp-OutputArea")
    page.wait_for_function("([el, word]) => el.innerText.includes(word) || el.innerText.includes('Error')",
                           arg=[output.element_handle(), until], timeout=RUN_MS)
    return output.inner_text()


# --------------------------------------------------------------------------- the class

def test_a_class_in_the_browser(klass: RunningClass, browser, shots: Path) -> None:
    step = Step(shots)
    timings: dict[str, float] = {}

    t = time.monotonic()
    said = _classroom("release", str(klass.root), ASSIGNMENT)
    timings["release"] = time.monotonic() - t
    assert said.startswith("exit 0") and "released" in said, said
    teacher_ctx, teacher = _login(browser, klass, "teacher")
    with step.failing(teacher, "instructor-release"):
        step.shot(teacher, "instructor-login")
        teacher.click("#login_submit")
        _lab_ready(teacher)
        step.shot(teacher, "instructor-lab")
        _menu(teacher, "Nbgrader", "Formgrader")
        frame = teacher.frame_locator("iframe").first
        frame.locator("tr", has_text=ASSIGNMENT).first.wait_for(timeout=UI_MS)
        step.shot(teacher, "instructor-formgrader-released")

    pages = {}
    by_hand = klass.login(ON_THE_COMMAND_LINE)
    by_hand.start_server()
    out = _on_the_command_line(by_hand, nbgrader("fetch_assignment", ASSIGNMENT) + edit(STUDENTS[ON_THE_COMMAND_LINE])
                               + nbgrader("submit", ASSIGNMENT))
    assert out["stdout"].count("exit 0") == 2 and "edited" in out["stdout"], out
    for name, kind in STUDENTS.items():
        if name == ON_THE_COMMAND_LINE:
            continue
        ctx, page = _login(browser, klass, name)
        pages[name] = (ctx, page)
        with step.failing(page, f"{name}-work"):
            t = time.monotonic()
            page.click("#login_submit")
            _lab_ready(page)
            timings[f"{name} login and server start"] = time.monotonic() - t
            step.shot(page, f"{name}-lab")
            _assignments(page)
            _row_button(page, "released_assignments_list", "Fetch").click()
            _row_button(page, "fetched_assignments_list", "Submit").wait_for(timeout=UI_MS)
            step.shot(page, f"{name}-fetched")
            page.goto(f"{klass.url}/user/{name}/lab/tree/{ASSIGNMENT}/{NOTEBOOK}")
            cell = page.locator(".jp-Notebook .jp-CodeCell").filter(
                has=page.locator(".cm-content", has_text="def copy_layouts("))
            cell.first.wait_for(timeout=RUN_MS)
            _type_cell(page, cell.first, answer(kind))
            page.keyboard.press("Control+s")
            page.wait_for_timeout(1500)
            step.shot(page, f"{name}-answer-{kind}")
            if kind == "hostile":
                out = _new_notebook_runs(page, HOSTILE.format(root=str(klass.root), course="gemmlab", repo=str(ROOT)),
                                         '"tried"')
                step.shot(page, f"{name}-probes-the-class")
                leaked = re.findall(r'"(\w+)": "READ (?!\[\])', out)
                assert not leaked, f"the hostile student read {leaked}:\n{out[:3000]}"
            _assignments(page)
            _row_button(page, "fetched_assignments_list", "Submit").click()
            page.locator("#submitted_assignments_list .list_item", has_text=ASSIGNMENT).first.wait_for(timeout=UI_MS)
            step.shot(page, f"{name}-submitted")
            if kind == "hostile":
                out = _new_notebook_runs(page, FORGE.format(exchange=str(klass.root / "exchange")), "forged")
                step.shot(page, f"{name}-forges-a-hand-in")
                assert "forged" in out, out
                assert "bob+" not in out.replace(f"bob+{ASSIGNMENT}+2099", ""), "she sees only her own hand-ins"

    alice = pages["alice"][1]
    with step.failing(alice, "alice-pool"):
        t = time.monotonic()
        out = _new_notebook_runs(alice, CHECK, "me: ")
        timings["a check through the pool (compile included)"] = time.monotonic() - t
        step.shot(alice, "alice-checks-a-kernel-on-the-pool")
        assert "token set: False gpu: False" in out and "passed: True" in out and "me: alice" in out, out

    t = time.monotonic()
    said = _classroom("grade", str(klass.root), ASSIGNMENT)
    timings["grade (collect, autograde 3, feedback, export)"] = time.monotonic() - t
    assert "collected 3 hand-in(s)" in said and "feedback for 3 student(s)" in said, said
    assert "names 'bob'; it is carol's" in said, said
    assert said.startswith("exit 1") and "need a GPU" in said, said       # 02's GPU tests, on a CPU
    with step.failing(teacher, "instructor-grades"):
        teacher.reload()
        _lab_ready(teacher)
        _menu(teacher, "Nbgrader", "Formgrader")
        frame = teacher.frame_locator("iframe").first
        link = frame.locator("tr", has_text=ASSIGNMENT).first.locator("td.num-submissions a")
        link.wait_for(timeout=UI_MS)
        assert link.inner_text().strip() == "3", link.inner_text()
        link.click()
        frame.locator("td.score").nth(2).wait_for(timeout=UI_MS)
        step.shot(teacher, "instructor-formgrader-three-scores")
        scores = sorted(s.strip() for s in frame.locator("td.score").all_inner_texts())
        assert scores == ["0 / 8", "0 / 8", "3 / 8"], scores

    out = _on_the_command_line(by_hand, nbgrader("fetch_feedback", ASSIGNMENT))
    assert "exit 0" in out["stdout"] and "Fetched feedback" in out["stdout"], out
    for name in pages:
        page = pages[name][1]
        with step.failing(page, f"{name}-feedback"):
            _assignments(page)
            _row_button(page, "submitted_assignments_list", "Fetch Feedback").click()
            fetched = klass.root / "home" / name / ASSIGNMENT / "feedback"
            deadline = time.monotonic() + UI_MS / 1000
            while not list(fetched.glob("*/*.html")) and time.monotonic() < deadline:
                time.sleep(0.5)
            assert list(fetched.glob("*/*.html")), f"{name}'s feedback was not fetched"
            page.locator("#refresh_assignments_list").click()
            if STUDENTS[name] == "hostile":   # nbgrader's list reads her inbound, forged entry and all: no link
                page.wait_for_timeout(3000)
                step.shot(page, f"{name}-feedback-fetched")
                continue
            page.locator("#submitted_assignments_list", has_text="view feedback").wait_for(timeout=UI_MS)
            step.shot(page, f"{name}-feedback-fetched")
            page.locator("#submitted_assignments_list a", has_text="view feedback").first.click()
            page.locator(".jp-DirListing-item", has_text=".html").first.dblclick()   # the report, in JupyterLab
            page.locator(".jp-HTMLViewer > iframe").first.wait_for(timeout=UI_MS)
            page.wait_for_timeout(2000)
            step.shot(page, f"{name}-feedback-report")

    for name in STUDENTS:     # each student's report, fetched into their home, holds their own score
        (html,) = (klass.root / "home" / name / ASSIGNMENT / "feedback").glob("*/*.html")
        report = html.read_text()
        assert name in report or ASSIGNMENT in report
        score = SCORES[name]
        assert f"{score} / 8" in report.replace("  ", " ") or f"{score}/8" in report, (name, report[:2000])
    canvas = list(csv.DictReader(io.StringIO((klass.root / "grades" / "canvas.csv").read_text())))
    assert canvas[0][ASSIGNMENT] == "8"                                     # the points possible
    assert {r["SIS Login ID"]: r[ASSIGNMENT] for r in canvas[1:]} == SCORES
    moodle = list(csv.DictReader(io.StringIO((klass.root / "grades" / "moodle.csv").read_text())))
    assert {r["Username"]: r[f"Assignment: {ASSIGNMENT} (Real)"] for r in moodle} == SCORES
    (shots / "timings.txt").write_text("".join(f"{k}: {v:.1f} s\n" for k, v in timings.items()))
    print("\n".join(f"{k}: {v:.1f} s" for k, v in timings.items()))
    for ctx, _ in [*pages.values(), (teacher_ctx, teacher)]:
        ctx.close()
