#!/usr/bin/env bash
# Create .venv and install inferfleet into it. WITH_TESTS=1 adds the test tools (MkDocs
# for the docs site among them) and the system programs the tests run, from Debian's
# packages: Prometheus for the integration tests, Chromium for the docs site test.
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
if [ "${WITH_TESTS:-0}" = "1" ]; then
  .venv/bin/python -m pip install --quiet -e ".[test]"
  # Debian package -> the program it provides -> which tests need it.
  for wanted in "prometheus prometheus integration" "chromium chromium docs-site"; do
    set -- $wanted
    if ! command -v "$2" >/dev/null 2>&1; then
      if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
        echo "installing $1 (Debian package) for the $3 tests" >&2
        (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$1" >/dev/null) \
          || echo "warning: $1 could not be installed; its $3 tests will skip (./hack/test.sh fails on skips)" >&2
      else
        echo "warning: $2 not found and cannot install it; its $3 tests will skip (./hack/test.sh fails on skips)" >&2
      fi
    fi
  done
else
  .venv/bin/python -m pip install --quiet -e .
fi
