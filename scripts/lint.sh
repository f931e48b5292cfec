#!/usr/bin/env bash
# lint.sh [tools | PACKAGES...]: the static checks of `make lint` and
# `make test`, offline once the tools are in place:
#   gofmt          no file of the repository needs formatting
#   go vet         PACKAGES (default ./...)
#   golangci-lint  .golangci.yml: errcheck, govet, gosec, ineffassign,
#                  staticcheck, unused, on PACKAGES with their tests
#   govulncheck    PACKAGES against a local copy of the Go vulnerability
#                  database; a vulnerability that the code reaches fails the
#                  check unless scripts/vulncheck-accepted.txt accepts it
#                  (only the standard library's, fixed in a Go release newer
#                  than the toolchain)
# `tools` only installs the tools and builds the database.
#
# The tools are pinned below and installed when missing, with `go install`
# through the Go module proxy, into ${XDG_CACHE_HOME:-$HOME/.cache}/voucherd/bin
# (one file per version, so changing a pin installs the new one). The
# database is built once per pinned version of the module golang.org/x/vulndb:
# its data/osv holds every report, its cmd/indexdb writes the layout that
# `govulncheck -db file://DIR` reads (index/db.json, index/modules.json,
# index/vulns.json, ID/GO-*.json), into .../voucherd/vulndb-VERSION.
# govulncheck never contacts the public database's server. To move the
# database on, set VULNDB_VERSION to a newer pseudo-version of
# golang.org/x/vulndb (the module has no tags; `go list -m -json
# golang.org/x/vulndb@latest`, run outside this module, names the newest)
# and review what govulncheck then reports.
#
# Idempotent; when everything is in place and clean it prints one line,
# the count of accepted vulnerabilities.
set -euo pipefail

GOLANGCI_LINT_VERSION=v2.15.0
GOVULNCHECK_VERSION=v1.9.0
VULNDB_VERSION=v0.0.0-20261105234957-e22db6528018

cd "$(dirname "$0")/.."
GO=${GO:-go}
CACHE="${XDG_CACHE_HOME:-$HOME/.cache}/voucherd"
BIN="$CACHE/bin"
GOLANGCI_LINT="$BIN/golangci-lint-$GOLANGCI_LINT_VERSION"
GOVULNCHECK="$BIN/govulncheck-$GOVULNCHECK_VERSION"
VULNDB="$CACHE/vulndb-$VULNDB_VERSION"
ACCEPTED=scripts/vulncheck-accepted.txt

die() {
	echo "lint.sh: $*" >&2
	exit 1
}

command -v "$GO" >/dev/null 2>&1 || die "$GO is not on PATH; voucherd needs Go $(awk '$1 == "go" {print $2}' go.mod) or newer"

# go_tool runs the go command outside this module, so that neither go.mod
# nor a go.work file takes part, with no GOFLAGS (go install PKG@VERSION
# refuses -mod).
go_tool() {
	(cd "$tmp" && GOFLAGS='' GOWORK=off "$GO" "$@")
}

# install_tool PKG VERSION DEST: go install PKG@VERSION, renamed to DEST.
install_tool() {
	local name=${1##*/}
	echo "lint.sh: installing $name $2 into $BIN" >&2
	mkdir -p "$BIN"
	go_tool install "$1@$2" >&2 || die "go install $1@$2 failed (is the Go module proxy reachable?)"
	mv -f "$tmp/bin/$name" "$3"
}

# build_vulndb: download golang.org/x/vulndb@VULNDB_VERSION, build its
# cmd/indexdb and write the database from its data/osv into VULNDB.
build_vulndb() {
	local dir modified
	echo "lint.sh: building the vulnerability database golang.org/x/vulndb@$VULNDB_VERSION into $VULNDB" >&2
	dir=$(go_tool mod download -json "golang.org/x/vulndb@$VULNDB_VERSION" | awk -F'"' '$2 == "Dir" {print $4}') ||
		die "go mod download golang.org/x/vulndb@$VULNDB_VERSION failed (is the Go module proxy reachable?)"
	[ -d "$dir/data/osv" ] || die "golang.org/x/vulndb@$VULNDB_VERSION has no data/osv"
	go_tool install "golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION" >&2 ||
		die "go install golang.org/x/vulndb/cmd/indexdb@$VULNDB_VERSION failed"
	"$tmp/bin/indexdb" -vulns "$dir/data/osv" -out "$tmp/vulndb" || die "indexdb failed"
	# indexdb leaves the database's modification time at zero; the
	# pseudo-version's commit time is when the reports were last changed.
	modified=$(sed -E 's/^v0\.0\.0-([0-9]{4})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})([0-9]{2})-[0-9a-f]+$/\1-\2-\3T\4:\5:\6Z/' <<<"$VULNDB_VERSION")
	printf '{"modified":"%s"}' "$modified" >"$tmp/vulndb/index/db.json"
	gzip -n -c "$tmp/vulndb/index/db.json" >"$tmp/vulndb/index/db.json.gz"
	mkdir -p "$CACHE"
	rm -rf "$VULNDB.partial"
	mv "$tmp/vulndb" "$VULNDB.partial"
	rm -rf "$VULNDB"
	mv "$VULNDB.partial" "$VULNDB"
}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export GOBIN="$tmp/bin"

[ -x "$GOLANGCI_LINT" ] || install_tool github.com/golangci/golangci-lint/v2/cmd/golangci-lint "$GOLANGCI_LINT_VERSION" "$GOLANGCI_LINT"
[ -x "$GOVULNCHECK" ] || install_tool golang.org/x/vuln/cmd/govulncheck "$GOVULNCHECK_VERSION" "$GOVULNCHECK"
[ -f "$VULNDB/index/modules.json" ] || build_vulndb
unset GOBIN

if [ "${1:-}" = tools ]; then
	exit 0
fi
if [ $# -eq 0 ]; then
	set -- ./...
fi

out=$(gofmt -l .)
if [ -n "$out" ]; then
	echo "gofmt needed on:"
	echo "$out"
	exit 1
fi

"$GO" vet "$@"

"$GOLANGCI_LINT" run --show-stats=false "$@"

# govulncheck exits 3 when the code reaches a known vulnerability. Its text
# lists each as "Vulnerability #N: GO-YYYY-NNNN", with "Standard library"
# in the entry when the vulnerable package is the standard library's.
rc=0
"$GOVULNCHECK" -db "file://$VULNDB" "$@" >"$tmp/vuln.txt" 2>&1 || rc=$?
case $rc in
0) exit 0 ;;
3) ;;
*)
	cat "$tmp/vuln.txt" >&2
	die "govulncheck failed (exit $rc)"
	;;
esac
awk '
	/^Vulnerability #[0-9]+: / { id = $3; std[id] = 0; ids[++n] = id }
	/^  Standard library$/ && id != "" { std[id] = 1 }
	/^=== (Package|Module) Results ===/ { exit }
	END { for (i = 1; i <= n; i++) print ids[i], (std[ids[i]] ? "stdlib" : "module") }
' "$tmp/vuln.txt" >"$tmp/found.txt"
[ -s "$tmp/found.txt" ] || {
	cat "$tmp/vuln.txt" >&2
	die "govulncheck reported vulnerabilities, but none could be read from its output"
}
accepted=$(awk '!/^#/ && NF {print $1}' "$ACCEPTED")
bad=0 ok=0
while read -r id where; do
	if [ "$where" = stdlib ] && grep -qxF "$id" <<<"$accepted"; then
		ok=$((ok + 1))
	else
		bad=$((bad + 1))
	fi
done <"$tmp/found.txt"
stale=$(awk '{print $1}' "$tmp/found.txt" | grep -vxF -f - <(printf '%s\n' "$accepted") || true)
if [ "$bad" -gt 0 ]; then
	cat "$tmp/vuln.txt"
	echo
	echo "govulncheck: the code reaches vulnerabilities that $ACCEPTED does not accept ($bad):"
	awk 'NR == FNR {acc[$1] = 1; next} !($2 == "stdlib" && acc[$1]) {print "  " $1 " (" ($2 == "stdlib" ? "standard library" : "a required module") ")"}' \
		<(printf '%s\n' "$accepted") "$tmp/found.txt"
	echo "Update the module that has it (go get MODULE@FIXED_VERSION; go mod tidy); a standard-library one needs a newer Go, or an entry there saying why it waits."
	exit 1
fi
echo "govulncheck: $ok standard-library vulnerabilities reachable in $("$GO" env GOVERSION), accepted until the toolchain moves ($ACCEPTED)"
# Entries of code outside PACKAGES are not reported either: only a run on
# every package tells that an entry is stale.
if [ -n "$stale" ] && [ "$*" = ./... ]; then
	echo "govulncheck: no longer reported, remove from $ACCEPTED: $(tr '\n' ' ' <<<"$stale")"
fi
