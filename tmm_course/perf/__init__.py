"""The performance lab of lessons 6-8.

Lessons 6 and 7: lesson 4's kernel one knob at a time (:mod:`~tmm_course.perf.knobs`), the run
that measured them on an H200 (:mod:`~tmm_course.perf.lessons`, ``python -m``) and its stored
results (:mod:`~tmm_course.perf.stored`), shared memory per GPU from the compiler
(:mod:`~tmm_course.perf.shared_memory`), the pipeline model (:mod:`~tmm_course.perf.pipeline`),
waves and quantisation (:mod:`~tmm_course.perf.waves`), and the intensity and roofline
arithmetic.

Lesson 8, the capstone's lab: the sweeps' configurations as data
(:mod:`~tmm_course.perf.sweeps`) and tuning by hand (:mod:`~tmm_course.perf.tuning`), which
chose its rules, measuring side by side with torch (:mod:`~tmm_course.perf.measure`), the
benchmark command (:mod:`~tmm_course.perf.bench`), and the GPU results the package ships
(:mod:`~tmm_course.perf.results`)."""
