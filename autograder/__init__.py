"""Grading the gemmlab course at class scale: ``python -m autograder --help``.

``autograder/nbgrader_config.py`` is the course's nbgrader configuration; ``autograder.harness``
grades untrusted submissions in a sandbox, one GPU each, locally or on Ray, and writes the
grades into nbgrader's gradebook. See ``autograder/README.md`` and ``docs/THREAT_MODEL.md``.
"""
