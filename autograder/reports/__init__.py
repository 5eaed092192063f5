"""What grading leaves for people, apart from grading itself: each student's HTML feedback
(:mod:`.feedback`), where grades go (:mod:`.store`: result files and nbgrader's gradebook), the capstone
leaderboard (:mod:`.leaderboard`) and an LMS's gradebook import file (:mod:`.lms_export`).

They read :class:`autograder.records.SubmissionResult` and the gradebook; none of them runs a hand-in.
"""
