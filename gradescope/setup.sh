#!/usr/bin/env bash
# Gradescope runs this once, as root, while it builds the autograder image (the zip made
# by `make gradescope-bundle` is unpacked into /autograder/source). It provides a Python
# of a supported version (3.11-3.13) with the exact pins of requirements-autograder.txt,
# and records its path in .mmspec-python for run_autograder.
#
# MMSPEC_PYTHON=/path/to/python skips the install and uses that interpreter (it must
# already have the pins): the project's own test does this to reuse its virtualenv.
set -euo pipefail

SOURCE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(dirname "$SOURCE")"
VENV="$ROOT/mmspec-venv"

supported() {  # is "$1" a Python 3.11-3.13?
  "$1" -c 'import sys; sys.exit(0 if (3, 11) <= sys.version_info[:2] <= (3, 13) else 1)' \
    >/dev/null 2>&1
}

if [ -n "${MMSPEC_PYTHON:-}" ]; then
  PY="$MMSPEC_PYTHON"
  supported "$PY" || { echo "setup.sh: $PY is not Python 3.11-3.13" >&2; exit 1; }
else
  BASE=""
  for candidate in python3 python3.13 python3.12 python3.11; do
    if command -v "$candidate" >/dev/null 2>&1 && supported "$candidate"; then
      BASE="$candidate"
      break
    fi
  done
  if [ -z "$BASE" ]; then
    # Ubuntu 22.04 images ship Python 3.10; 3.11 is in its universe repository.
    apt-get update -q
    apt-get install -y -q python3.11 python3.11-venv
    BASE=python3.11
  fi
  if ! "$BASE" -m venv "$VENV" >/dev/null 2>&1; then
    version="$("$BASE" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')"
    apt-get update -q
    apt-get install -y -q "python${version}-venv"
    "$BASE" -m venv "$VENV"
  fi
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check \
    -r "$SOURCE/requirements-autograder.txt"
  PY="$VENV/bin/python"
fi

# The pins must be importable at exactly these versions: the same versions give the
# same test cases, and so the same grades.
"$PY" - "$SOURCE/requirements-autograder.txt" <<'PYTHON'
import importlib.metadata
import sys

wrong = []
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.split("#", 1)[0].strip()
    if not line:
        continue
    name, _, version = line.partition("==")
    try:
        have = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        have = "missing"
    if have != version:
        wrong.append(f"{name}: need {version}, have {have}")
if wrong:
    sys.exit("setup.sh: " + "; ".join(wrong))
PYTHON

echo "$PY" > "$SOURCE/.mmspec-python"
echo "setup.sh: grading with $("$PY" --version) at $PY"

# The sandbox (docs/grading.md, "Isolation"): the submission runs as an unprivileged user
# of its own (util-linux setpriv, in every Debian and Ubuntu image), which may not read
# the rubric or grading.env (a secret seed), nor signal the grader; every process of that
# user is killed when grading ends. MMSPEC_SANDBOX=none opts out (trusted code only).
# A grade's forked workers run their children as users of their own (burying a child kills
# every process of its user): MMSPEC_SANDBOX_WORKERS more users, $SANDBOX_USER-1, ..., so
# that a grade uses the CPUs the assignment's settings give (half a CPU unless raised).
SANDBOX_USER="${MMSPEC_SANDBOX_USER:-mmspec-grader}"
SANDBOX_WORKERS="${MMSPEC_SANDBOX_WORKERS:-4}"
rm -f "$SOURCE/.mmspec-sandbox-user"
if [ "${MMSPEC_SANDBOX:-user}" = "none" ]; then
  echo "setup.sh: no sandbox (MMSPEC_SANDBOX=none): the submission runs as $(id -un)"
elif [ "$(id -u)" != 0 ]; then
  echo "setup.sh: no sandbox: creating its user needs root (Gradescope runs this as root)" >&2
else
  command -v setpriv >/dev/null || { echo "setup.sh: setpriv (util-linux) is missing" >&2; exit 1; }
  case "$SANDBOX_WORKERS" in
    ''|*[!0-9]*) echo "setup.sh: MMSPEC_SANDBOX_WORKERS must be a number" >&2; exit 1 ;;
  esac
  SANDBOX_USERS="$SANDBOX_USER"
  for worker in $(seq 1 "$SANDBOX_WORKERS"); do
    SANDBOX_USERS="$SANDBOX_USERS,$SANDBOX_USER-$worker"
  done
  for user in ${SANDBOX_USERS//,/ }; do
    if ! id -u "$user" >/dev/null 2>&1; then
      useradd --system --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin \
        "$user"
    fi
    [ "$(id -u "$user")" != 0 ] || { echo "setup.sh: $user is root" >&2; exit 1; }
  done
  # what decides the grade is root's alone; the grader's code stays readable
  chmod 600 "$SOURCE/grading.env"
  chmod -R go-rwx "$SOURCE/rubrics"
  # and so is the answer key: the reference and the models the properties compare with
  # (the reference stands in for what a submission lacks from the grader's process:
  # harness/isolation/standins.py), compiled copies included; run_autograder writes none
  chmod -R go-rwx "$SOURCE/reference" "$SOURCE/properties/models" \
    "$SOURCE/properties/oracles.py" "$SOURCE/properties/differential.py"
  find "$SOURCE" -name __pycache__ -type d -prune -exec rm -rf {} +
  echo "$SANDBOX_USERS" > "$SOURCE/.mmspec-sandbox-user"
  echo "setup.sh: the submission will run as $SANDBOX_USER (uid $(id -u "$SANDBOX_USER")),"\
    "a forked worker's children as one of ${SANDBOX_USERS#*,}"
fi
