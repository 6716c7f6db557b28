"""The performance lab of lesson 6: the sweeps' configurations as data
(:mod:`~tmm_course.perf.sweeps`), measuring side by side with torch
(:mod:`~tmm_course.perf.measure`), the benchmark command (:mod:`~tmm_course.perf.bench`), the
optimization journey, tuning by hand, the intensity and roofline arithmetic, and the GPU
results the package ships (:mod:`~tmm_course.perf.results`)."""
