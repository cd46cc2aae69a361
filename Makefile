# `make run`: install everything on a fresh Debian machine and start the stack.
# `make test`: install everything and run the test suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install run stop status demo test test-unit bench clean

install: $(STAMP) /usr/lib/rabbitmq/bin/rabbitmq-server

SUDO := $(if $(filter 0,$(shell id -u)),,sudo)
# apt-get install, refreshing the package lists first when they are stale or missing.
APT_INSTALL = command -v apt-get >/dev/null || { echo "$(1) is missing and there is no apt-get: install it"; exit 1; }; \
	$(SUDO) apt-get install -y --no-install-recommends $(1) \
	|| { $(SUDO) apt-get update && $(SUDO) apt-get install -y --no-install-recommends $(1); }

# Debian's RabbitMQ (we run it as a private node, never as the system service).
/usr/lib/rabbitmq/bin/rabbitmq-server:
	$(call APT_INSTALL,rabbitmq-server)

# Real proxy servers for the fleet tests.
/usr/bin/tinyproxy:
	$(call APT_INSTALL,tinyproxy)

# A real browser for the dashboard tests (Debian's, driven headless by Selenium).
/usr/bin/chromedriver:
	$(call APT_INSTALL,chromium chromium-driver)

$(STAMP): setup.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

run: install
	$(BIN)/monitor up
	$(BIN)/monitor status
	@echo "add a homepage: $(BIN)/monitor watch add https://example.org/ ; follow alerts: $(BIN)/monitor alerts --follow"

stop:
	$(BIN)/monitor down

status:
	$(BIN)/monitor status

demo: install
	$(BIN)/monitor demo

test: install /usr/bin/tinyproxy /usr/bin/chromedriver
	$(BIN)/pytest -q

test-unit: install
	$(BIN)/pytest -q tests/unit

bench: install
	$(BIN)/python bench/extraction.py
	$(BIN)/python bench/scheduler.py
	$(BIN)/python bench/processor.py
	$(BIN)/python bench/worker_memory.py
	$(BIN)/python bench/overload.py
	$(BIN)/python bench/compare.py --pages 1000 --runs 3

clean:
	-$(BIN)/monitor down
	rm -rf var
