"""Rosters, tokens and the Authorization header: issued from the roster, kept as hashes, refused with the reason."""
from __future__ import annotations

import csv
import os
import time
from pathlib import Path

import pytest

from pool.__main__ import main
from pool.auth import Authenticator
from pool.errors import AuthError, RosterError
from pool.roster import read_roster
from pool.tokens import TokenStore, default_store_path

from .helpers import STUDENTS, Klass


def test_rosters_in_nbgrader_csv_or_one_id_a_line(tmp_path: Path) -> None:
    csv_roster = tmp_path / "a.csv"
    csv_roster.write_text("first_name,id,email\nAl,alice,a@x\nBo,bob,b@x\nAl,alice,a@x\n")
    assert read_roster(csv_roster) == ["alice", "bob"]
    plain = tmp_path / "b.txt"
    plain.write_text("# class of 2026\nalice\n\nbob\n")
    assert read_roster(plain) == ["alice", "bob"]
    bad = tmp_path / "c.txt"
    bad.write_text("alice\nbob smith; rm -rf /\n")
    with pytest.raises(RosterError, match="entry 2"):
        read_roster(bad)


def test_a_token_verifies_and_the_store_holds_only_its_hash(tmp_path: Path) -> None:
    store = TokenStore()
    (issued,) = store.issue(["alice"], 3600)
    path = tmp_path / "store.json"
    store.save(path)
    text = path.read_text()
    secret = issued.token.rsplit("_", 1)[1]
    assert secret not in text and issued.token not in text
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert TokenStore.load(path).verify(issued.token).student == "alice"


@pytest.mark.parametrize("case, words", [
    ("malformed", "malformed"),
    ("wrong secret", "unknown"),
    ("unknown id", "unknown"),
    ("replaced", "replaced"),
    ("expired", "expired on"),
])
def test_bad_tokens_are_refused_with_the_reason(case: str, words: str) -> None:
    store = TokenStore()
    now = time.time()
    (token,) = (t.token for t in store.issue(["alice"], 3600, now=now))
    prefix, token_id, secret = token.split("_")
    bad = {
        "malformed": token + " ",
        "wrong secret": f"{prefix}_{token_id}_{'0' * 64}",
        "unknown id": f"{prefix}_{'f' * 12}_{secret}",
        "replaced": token,
        "expired": token,
    }[case]
    if case == "replaced":
        store.issue(["alice"], 3600)
    with pytest.raises(AuthError, match=words):
        store.verify(bad, now=now + (7200 if case == "expired" else 0))


def test_the_header_is_checked_and_a_student_dropped_from_the_roster_loses_access(klass: Klass) -> None:
    auth = Authenticator(klass.roster, klass.store)
    assert auth.authenticate(f"Bearer {klass.tokens['bob']}").student == "bob"
    for header, words in [(None, "no token"), ("Basic abc", "Bearer"), ("Bearer", "Bearer")]:
        with pytest.raises(AuthError, match=words):
            auth.authenticate(header)
    klass.roster.write_text("id\nalice\ncarol\n")
    with pytest.raises(AuthError, match="no longer on the class roster"):
        auth.authenticate(f"Bearer {klass.tokens['bob']}")


def test_the_tokens_command_hands_out_tokens_the_service_accepts(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    roster = tmp_path / "roster.csv"
    roster.write_text("id\n" + "\n".join(STUDENTS) + "\n")
    out = tmp_path / "tokens.csv"
    assert main(["tokens", "--roster", str(roster), "--out", str(out), "--days", "2"]) == 0
    rows = list(csv.DictReader(out.read_text().splitlines()))
    assert [r["student"] for r in rows] == list(STUDENTS)
    assert os.stat(out).st_mode & 0o777 == 0o600
    auth = Authenticator(roster, default_store_path(roster))
    assert {auth.authenticate(f"Bearer {r['token']}").student for r in rows} == set(STUDENTS)
    # Re-issuing for one student replaces only that student's token, while the service runs.
    assert main(["tokens", "--roster", str(roster), "--out", str(tmp_path / "bob.csv"), "--only", "bob"]) == 0
    old_bob = next(r["token"] for r in rows if r["student"] == "bob")
    with pytest.raises(AuthError, match="replaced"):
        auth.authenticate(f"Bearer {old_bob}")
    assert auth.authenticate(f"Bearer {rows[0]['token']}").student == "alice"
    assert main(["tokens", "--roster", str(roster), "--out", str(out), "--only", "mallory"]) == 2
    assert "not on the roster: mallory" in capsys.readouterr().err
