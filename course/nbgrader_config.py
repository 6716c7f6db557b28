"""nbgrader for the tmm-course homework: each test cell is scored by the course's
grader, outside the student's kernel (tmm_course.teach.nbgrader_grade.configure says how)."""

import os

from tmm_course.teach.nbgrader_grade import configure

configure(get_config(), os.path.dirname(os.path.abspath(__file__)))  # noqa: F821 - nbgrader's
