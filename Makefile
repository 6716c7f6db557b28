# The two commands of the course (each sets up .venv first, once):
#   make course   open the course in JupyterLab
#   make test     lint, unit tests, and every notebook executed with nbval
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# extra JupyterLab options, e.g. make course LAB_ARGS="--no-browser --port 8899"
LAB_ARGS ?=
AS_ROOT := $(if $(filter 0,$(shell id -u)),--allow-root,)

.PHONY: course test setup colab-links student grade clean

course: $(STAMP)
	$(BIN)/jupyter lab --ServerApp.root_dir="$(CURDIR)" \
	  --LabApp.default_url=/lab/tree/notebooks/00_start_here.ipynb $(AS_ROOT) $(LAB_ARGS)

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

setup: $(STAMP)

$(STAMP): pyproject.toml tools/setup-venv.sh
	PYTHON=$(PYTHON) VENV=$(VENV) bash tools/setup-venv.sh
	touch $@

# regenerate colab_links.md and the notebooks' Colab install cells
colab-links: $(STAMP)
	$(BIN)/python -m tmm_course.teach.colab

# the student copy: every notebook without its solutions (make student STUDENT=handout/)
STUDENT ?= student
student: $(STAMP)
	$(BIN)/python -m tmm_course.teach.release notebooks $(STUDENT)

# grade a folder of submitted homework notebooks into grades.csv
# (make grade SUBMISSIONS=inbox/ TIMEOUT=300 JOBS=2)
SUBMISSIONS ?= submissions
TIMEOUT ?= 300
JOBS ?= 2
grade: $(STAMP)
	$(BIN)/python -m tmm_course.teach.grade $(SUBMISSIONS) --out grades.csv --timeout $(TIMEOUT) --jobs $(JOBS)

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache .ruff_cache
