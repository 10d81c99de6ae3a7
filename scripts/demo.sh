#!/usr/bin/env bash
# A walk through infrakit on the e2e stack, in a scratch directory, using the
# binaries `make build` put in bin/. Run it with `make demo`.
# KEEP=1 keeps the scratch directory for a look around afterwards.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/bin"
infrakit="$bin/infrakit"
if [[ ! -x "$infrakit" ]]; then
	echo "demo: $infrakit is missing; run 'make build' (or 'make demo') first" >&2
	exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/infrakit-demo.XXXXXX")"
if [[ "${KEEP:-}" == 1 ]]; then
	trap 'echo "==> scratch directory kept: $work"' EXIT
else
	trap 'rm -rf "$work"' EXIT
fi

step() {
	echo
	echo "==> $*"
}

# run echoes a command, then runs it.
run() {
	echo "\$ $*"
	"$@"
}

if compgen -G "$root/testdata/e2e/*.hcl" >/dev/null; then
	step "The stack: testdata/e2e, copied into $work"
	cp "$root"/testdata/e2e/*.hcl "$work/"
else
	# Without the e2e stack in the tree, a small stack with the same providers.
	step "The stack: a small one written into $work"
	cat >"$work/main.hcl" <<'HCL'
stack "demo" {}

provider "simulator" {}
provider "vanilla" {}

group "web" {
  size = 3
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo hello"] }
  }
}
HCL
fi
run ls "$work"

step "Install the providers the stack needs from bin/ and pin them in .infrakit.lock.hcl"
run "$infrakit" -chdir="$work" init -plugin-dir "$bin"
run cat "$work/.infrakit.lock.hcl"

step "The installed providers"
run "$infrakit" -chdir="$work" plugins ls

step "Versions of infrakit and its providers"
run "$infrakit" -chdir="$work" version

step "Done"
