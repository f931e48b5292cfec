#!/usr/bin/env bash
# schemathesis.sh: install Schemathesis (pinned) into a virtual environment
# under the user's cache folder, where cmd/voucherd TestSchemathesis finds it:
# ${XDG_CACHE_HOME:-$HOME/.cache}/voucherd/schemathesis-VERSION. Idempotent:
# quiet and quick when it is there. Prints the executable's path.
#
# The version must match SchemathesisVersion in
# cmd/voucherd/schemathesis_test.go.
set -euo pipefail

VERSION=4.32.5
dir="${XDG_CACHE_HOME:-$HOME/.cache}/voucherd/schemathesis-$VERSION"
bin="$dir/bin/schemathesis"

# .installed is written last: a run that was cut short installs again.
if [ -x "$bin" ] && [ -f "$dir/.installed" ]; then
	echo "$bin"
	exit 0
fi
echo "schemathesis.sh: installing Schemathesis $VERSION into $dir" >&2
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "schemathesis==$VERSION" >&2
touch "$dir/.installed"
echo "$bin"
