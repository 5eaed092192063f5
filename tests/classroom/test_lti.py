"""LTI 1.3 logins from an LMS, and grades back through Assignment and Grade Services, against a small platform
of our own (tests/classroom/lti_platform.py says what it stands in for) and the class's real Hub."""
from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Iterator

import pytest

from tests.classroom.running import HubUser, RunningClass, require_class_tools, running_class

pytest.importorskip("ltiauthenticator", reason="the `class` extra: pip install -e '.[class]'")
pytest.importorskip("joserfc", reason="the `class` extra: pip install -e '.[class]'")
from tests.classroom.lti_platform import Platform, form_fields  # noqa: E402

pytestmark = [pytest.mark.slow]
COURSE = "gpu-601"


@pytest.fixture(scope="module")
def lms() -> Iterator[Platform]:
    platform = Platform()
    platform.state.courses = {COURSE: "GPU Programming", "art-101": "Drawing"}
    for login, name, role in (("ada", "Ada Lovelace", "student"), ("grace", "Grace Hopper", "instructor"),
                              ("staffer", "Sam Staff", "staff")):
        platform.enrol(login, name, role)
    yield platform
    platform.stop()


@pytest.fixture(scope="module")
def klass(lms: Platform, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningClass]:
    from classroom.ags import tool_key
    from classroom.settings import ClassDir

    require_class_tools()
    folder = tmp_path_factory.mktemp("lti")
    registration = folder / "lti.json"
    registration.write_text(json.dumps(lms.registration(COURSE)))
    root = folder / "class"
    with running_class(root, [], [], "--auth", "lti", "--lti", str(registration)) as running:
        lms.state.redirect_uris = [f"{running.url}/hub/lti13/oauth_callback"]
        lms.state.tool_jwks = json.loads(json.dumps({"keys": [tool_key(ClassDir(root)).as_dict(private=False)]}))
        yield running


def _launch(klass: RunningClass, lms: Platform, login: str, course: str = COURSE, **hint: object) -> tuple[HubUser, int, str]:
    """The LMS's launch as a browser follows it: login initiation -> platform -> id_token posted to the Hub."""
    user = HubUser(klass, login)
    form = lms.launch_form(klass.url, login, course, **hint)
    form["target_link_uri"] = f"{klass.url}/hub/home"
    status, page, where = user.open("/hub/lti13/oauth_login", form)
    assert status == 200 and where.startswith(lms.url), (status, where, page[:500])
    action, fields = form_fields(page.decode())
    assert action.startswith(klass.url) and "id_token" in fields
    status, body, where = user.open(action.removeprefix(klass.url), fields)
    return user, status, html.unescape(body.decode("utf-8", "replace"))


def _me(user: HubUser) -> dict:
    status, model = user.api("GET", "/hub/api/user")
    assert status == 200, (status, model)
    return model


def test_a_learner_and_an_instructor_log_in_with_their_course_roles(klass: RunningClass, lms: Platform) -> None:
    ada, status, _ = _launch(klass, lms, "ada")
    assert status == 200
    ada_sub = lms.state.people["ada"].sub
    me = _me(ada)
    assert me["name"] == ada_sub and me["groups"] == ["students"]
    grace, status, _ = _launch(klass, lms, "grace")
    assert status == 200 and _me(grace)["groups"] == ["instructors"]
    people = json.loads((klass.root / "people.json").read_text())
    assert people[ada_sub]["email"] == "ada@uni.example" and people[ada_sub]["role"] == "student"
    assert people[ada_sub]["lms_user_id"] == lms.state.people["ada"].lms_user_id
    ags = json.loads((klass.root / "lti_ags.json").read_text())
    assert ags[COURSE]["lineitems"] == f"{lms.url}/courses/{COURSE}/lineitems"


@pytest.mark.parametrize("login, course, hint, words", [
    ("ada", "art-101", {}, "not from the class's course"),
    ("staffer", COURSE, {}, "neither a Learner nor an Instructor"),
    ("ada", COURSE, {"deployment": "dep-other"}, "another deployment"),
    ("ada", COURSE, {"forge": True}, "Signature"),
])
def test_launches_from_elsewhere_without_a_role_or_forged_are_refused(klass: RunningClass, lms: Platform, login: str,
                                                                     course: str, hint: dict, words: str) -> None:
    user, status, body = _launch(klass, lms, login, course, **hint)
    assert status in (400, 401, 403) and words.lower() in body.lower(), (status, body[-1500:])
    assert _status_of_api(user) == 403


def _status_of_api(user: HubUser) -> int:
    status, _ = user.api("GET", "/hub/api/user")
    return status


def test_grades_go_back_through_ags(klass: RunningClass, lms: Platform) -> None:
    from autograder.reports.lms_export import Score
    from classroom.ags import send_grades
    from classroom.settings import ClassDir

    _launch(klass, lms, "ada")
    where = ClassDir(klass.root)
    ada = lms.state.people["ada"].sub
    lines = send_grades(where, "02_tiled_copy", [Score(ada, "02_tiled_copy", 3.0, 8.0),
                                                  Score("walkin", "02_tiled_copy", 5.0, 8.0)])
    assert lines == [f"LTI AGS, course {COURSE}: 1 score(s) of 02_tiled_copy sent; no LMS launch for walkin (not sent)"]
    (item,) = lms.state.lineitems[COURSE]
    assert item["resourceId"] == "02_tiled_copy" and item["scoreMaximum"] == 8.0
    (score,) = lms.state.scores
    assert score["userId"] == ada and score["scoreGiven"] == 3.0 and score["gradingProgress"] == "FullyGraded"
    assert score["lineitem"] == item["id"]
    send_grades(where, "02_tiled_copy", [Score(ada, "02_tiled_copy", 8.0, 8.0)])   # a regrade reuses the line item
    assert len(lms.state.lineitems[COURSE]) == 1 and lms.state.scores[-1]["scoreGiven"] == 8.0


def test_a_tool_key_the_platform_does_not_know_gets_no_token(klass: RunningClass, lms: Platform,
                                                            tmp_path: Path) -> None:
    from joserfc.jwk import RSAKey

    from classroom.ags import AgsClient, AgsError
    from classroom.settings import LtiSettings

    stranger = AgsClient(LtiSettings(**lms.registration(COURSE)), RSAKey.generate_key(2048, parameters={"kid": "x"}))
    with pytest.raises(AgsError, match="HTTP 401"):
        stranger.access_token()
