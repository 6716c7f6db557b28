"""Tools for teaching the course: the student copy (:mod:`~tmm_course.teach.release`), batch
grading (:mod:`~tmm_course.teach.grade`) and the Colab links and install cells
(:mod:`~tmm_course.teach.colab`)."""
