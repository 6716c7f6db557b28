"""Pictures of what the kernels did: pure functions that run a kernel, return its data and draw
a matplotlib Figure (no screen needed), with thin ipywidgets wiring in :mod:`.widgets`."""
