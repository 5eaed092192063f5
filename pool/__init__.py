"""The class's GPU pool: students check and time their kernels on shared GPUs through the kernel judge.

Instructor tooling (like ``autograder/``, not installed into students' environments), run as
``python -m pool``:

- ``python -m pool tokens --roster roster.csv --out tokens.csv``: one token per student
  (pool.tokens; the server keeps only hashes and expiries, in ``roster.tokens.json``);
- ``python -m pool serve --roster roster.csv``: the HTTP service (pool.service) that
  authenticates each request (pool.auth), applies per-student limits (pool.limits), queues
  fairly over the GPUs (pool.scheduler) and judges each request in a fresh, sandboxed judge
  process (pool.worker) on this host's GPUs or on Ray actors across hosts (pool.ray_pool).

What crosses the wire is a ``gemmlab.judge.JudgeRequest`` (the kernel and its launch as data)
and the judge's plain report; operands are generated on the GPU host. pool/README.md tells an
instructor how to run it and what it exposes.
"""
