#!/usr/bin/env bash
# openapi-python-client.sh: install openapi-python-client (pinned) into a
# virtual environment under the user's cache folder, where cmd/voucherd
# TestOpenAPIPythonClient finds it:
# ${XDG_CACHE_HOME:-$HOME/.cache}/voucherd/openapi-python-client-VERSION.
# Idempotent: quiet and quick when it is there. Prints the executable's path.
#
# The version must match OpenAPIPythonClientVersion in
# cmd/voucherd/openapi_python_test.go.
set -euo pipefail

VERSION=0.29.1
dir="${XDG_CACHE_HOME:-$HOME/.cache}/voucherd/openapi-python-client-$VERSION"
bin="$dir/bin/openapi-python-client"

# .installed is written last: a run that was cut short installs again.
if [ -x "$bin" ] && [ -f "$dir/.installed" ]; then
	echo "$bin"
	exit 0
fi
echo "openapi-python-client.sh: installing openapi-python-client $VERSION into $dir" >&2
rm -rf "$dir"
python3 -m venv "$dir"
"$dir/bin/python" -m pip install --quiet --disable-pip-version-check "openapi-python-client==$VERSION" >&2
touch "$dir/.installed"
echo "$bin"
