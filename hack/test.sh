#!/usr/bin/env bash
# The one test command (README, CI): install what the tests need, lint, type-check,
# check the import contract and the generated files, then run the test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_TESTS=1 hack/setup.sh
export PATH="$PWD/.venv/bin:$PATH"
echo "== ruff"; ruff check operator tests hack
echo "== mypy --strict"; mypy
echo "== import contract"; lint-imports
echo "== pytest"; pytest "$@"
