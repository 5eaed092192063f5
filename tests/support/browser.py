"""Debian's Chromium for the browser tests (never a Playwright download), and where their screenshots go.

A browser test skips where Chromium is missing and ``scripts/setup.sh`` could not have installed it (not
root, not Debian), and fails instead where it could have, or where ``CI`` is set."""
from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from tests.support import ROOT


def chromium() -> str | None:
    """Debian's Chromium (or $GEMMLAB_CHROMIUM)."""
    candidates = [os.environ.get("GEMMLAB_CHROMIUM"), "/usr/lib/chromium/chromium-headless-shell",
                  "/usr/lib/chromium/chromium", shutil.which("chromium"), shutil.which("chromium-browser")]
    return next((c for c in candidates if c and os.path.isfile(c) and os.access(c, os.X_OK)), None)


def setup_could_install() -> bool:
    """scripts/setup.sh installs Chromium where it runs as root on Debian with apt-get (as CI does)."""
    try:
        debian = "ID=debian" in Path("/etc/os-release").read_text().splitlines()
    except OSError:
        debian = False
    return debian and hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get") is not None


def browser_tests_run() -> bool:
    """Whether a browser test runs here (or fails for want of Chromium) rather than skips: a test that drives the
    same flow without a browser runs only where this is False."""
    return chromium() is not None or setup_could_install() or bool(os.environ.get("CI"))


def require_browser() -> str:
    """The Chromium binary, or a skip (a failure under CI or where setup would have installed it)."""
    exe = chromium()
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        pytest.fail("playwright is missing: it is in the `test` extra; run `bash scripts/setup.sh`")
    if exe is None:
        msg = ("no Chromium found: `apt-get install -y chromium` (Debian; scripts/setup.sh does it as root) "
               "or set GEMMLAB_CHROMIUM to a Chromium binary")
        if browser_tests_run():
            pytest.fail(msg)
        pytest.skip(msg)
    return exe


def artifacts(name: str) -> Path:
    """``$GEMMLAB_ARTIFACTS/<name>`` (default ``test-artifacts/<name>`` in the checkout), emptied of old pictures."""
    out = Path(os.environ.get("GEMMLAB_ARTIFACTS") or ROOT / "test-artifacts") / name
    out.mkdir(parents=True, exist_ok=True)
    for f in out.iterdir():
        if f.is_file() and f.suffix in (".png", ".txt", ".log"):
            f.unlink()
    return out
