"""The grading harness: one module per job (see docs/DESIGN.md, "autograder")."""
