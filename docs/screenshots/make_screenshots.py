"""Regenerate the phone screenshots in this folder, offline: ``python docs/screenshots/make_screenshots.py``.

They come from the screen tests, which build the demo's report and an annotation project in a
temporary folder, open them in Debian's chromium (``/usr/bin/chromium``) as a 390 x 844 touch
screen and save what they checked to ``test-artifacts/``. This script runs those tests (only the
phone's) and copies the pictures here:

* ``report-phone.png``: the top of the demo's report;
* ``report-case-phone.png``: a case card, with every judge's picks and the doctors' votes;
* ``annotate-case-phone.png``: the case page of the annotation app, as a doctor sees it.

Needs the package's test dependencies (pytest, playwright) and chromium; nothing is downloaded.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
SHOTS = ("report-phone.png", "report-case-phone.png", "annotate-case-phone.png")
TESTS = (
    "tests/report/test_report_screens.py::test_the_report_reads_on_a_phone_and_a_desktop[phone]",
    "tests/annotate/test_annotate_screens.py::test_a_doctor_can_label_on_a_phone_and_a_desktop[phone]",
)


def main() -> int:
    """Run the phone's screen tests and copy their screenshots here; the exit status of the run."""
    artifacts = ROOT / "test-artifacts"
    for name in SHOTS:
        (artifacts / name).unlink(missing_ok=True)
    path = os.pathsep.join(filter(None, [str(ROOT / "src"), os.environ.get("PYTHONPATH")]))
    env = dict(os.environ, HF_HUB_OFFLINE="1", PYTHONPATH=path)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS], cwd=ROOT, env=env)
    if done.returncode != 0:
        print("the screen tests failed (or were skipped): no screenshot copied", file=sys.stderr)
        return done.returncode
    for name in SHOTS:
        source = artifacts / name
        if not source.exists():
            print(f"{source} was not written (chromium or playwright missing?)", file=sys.stderr)
            return 1
        shutil.copyfile(source, HERE / name)
        print(f"{HERE / name}: {source.stat().st_size:,} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
