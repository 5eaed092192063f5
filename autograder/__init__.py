"""Grading the gemmlab course at class scale: ``python -m autograder --help``.

``autograder/nbgrader_config.py`` is the course's nbgrader configuration. The grader's domain:
:mod:`autograder.course` (folders, hand-ins, where grades go), :mod:`autograder.records` (jobs and
results), :mod:`autograder.autograde` (one assignment, start to finish), :mod:`autograder.schedule`
(local workers per GPU, or Ray); :mod:`autograder.harness` runs one submission in a sandbox;
:mod:`autograder.reports` turns results into feedback pages, the gradebook, the leaderboard and LMS files;
:mod:`autograder.cell_metadata` is the vocabulary of the notebooks' cell metadata.
:mod:`autograder.cli` only reads arguments. See ``autograder/README.md`` and ``docs/THREAT_MODEL.md``.
"""
