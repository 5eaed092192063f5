"""Run a class on one machine: JupyterHub, nbgrader's exchange, the GPU pool behind the Hub's login, grades to the LMS.

Instructor tooling (like ``autograder/`` and ``pool/``, not installed into students' environments),
run as ``python -m classroom``; the README's "Run a class" section is the walk-through and
docs/THREAT_MODEL.md says what the Hub adds and trusts.
"""
