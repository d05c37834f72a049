#!/usr/bin/env bash
# Create .venv and install inferfleet into it. WITH_TESTS=1 adds the test tools and the
# system programs the integration tests run (Prometheus from Debian's packages).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip >/dev/null
if [ "${WITH_TESTS:-0}" = "1" ]; then
  .venv/bin/python -m pip install --quiet -e ".[test]"
  if ! command -v prometheus >/dev/null 2>&1; then
    if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
      echo "installing prometheus (Debian package) for the integration tests" >&2
      (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
        || echo "warning: prometheus could not be installed; its integration tests will skip (./hack/test.sh fails on skips)" >&2
    else
      echo "warning: prometheus not found and cannot install it; its integration tests will skip (./hack/test.sh fails on skips)" >&2
    fi
  fi
else
  .venv/bin/python -m pip install --quiet -e .
fi
