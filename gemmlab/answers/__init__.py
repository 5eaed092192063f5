"""A student's answers as the grader's judge sees them: code of two processes, and what crosses between them.

When a notebook is graded its test cells run in the judge, a kernel that runs the instructor's cells and never a
line of the student's Python. The two kernels share nothing but a socket each to the grader, which relays whole
lines between them (``GEMMLAB_ANSWER_FD`` names the socket's file descriptor, inherited at start).

- :mod:`.wire`: what crosses and how (environment names, limits, the marks of tensors and compiled kernels inside
  plain data, the errors, the line reader, the one walk over nested values), imported by both sides;
- :mod:`.serving`: the student's side (describe the answers, answer the judge's calls, record launches);
- :mod:`.stand_ins`: the judge's side (bind the answers as stand-ins whose calls cross, replay recorded launches);
- :mod:`.placeholders`: whether an exercise is still its placeholder, on either side.

Outside grading (``GEMMLAB_JUDGE`` unset) none of this is used: a notebook's tests call the student's objects
directly, with the same messages. Nothing is imported here, so each process loads only its side.
"""
