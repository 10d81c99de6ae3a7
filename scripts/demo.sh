#!/usr/bin/env bash
# A narrated walk through infrakit on the e2e stack (testdata/e2e), in a
# scratch directory, using the binaries `make build` put in bin/. Run it with
# `make demo`. KEEP=1 keeps the scratch directory for a look around
# afterwards; PAUSE=1 waits for Enter before each step.
#
# What it shows: install the providers and pin them, validate, plan and apply
# the stack's two groups (5 miners, 10 cattle), list and inspect them, scale
# one, destroy chosen instances, free a group (infrakit lets go, nothing is
# touched), apply again (infrakit takes it back), heal three vanished
# instances with `infrakit watch` running (and read its web UI), and destroy
# everything. It ends by printing the web UI's URL.
# Along the way the ingress keeps the three load balancers' routes and
# backends, and the enrollment the NFS authorizations, in step with the
# groups: the plan is a graph of steps, apply runs exactly those steps and
# counts what the plan counted, every new member is registered and
# authorized once it runs, and every member that goes is deregistered and
# revoked first, then drained and destroyed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/bin"
for b in infrakit infrakit-provider-simulator infrakit-provider-vanilla; do
	if [[ ! -x "$bin/$b" ]]; then
		echo "demo: $bin/$b is missing; run 'make build' (or 'make demo') first" >&2
		exit 1
	fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/infrakit-demo.XXXXXX")"
if [[ "${KEEP:-}" == 1 ]]; then
	trap 'echo; echo "==> scratch directory kept: $work"' EXIT
else
	trap 'rm -rf "$work"' EXIT
fi

# The demo runs in the scratch directory with bin/ first on PATH, so the
# commands it shows are the ones a user would type. The simulator keeps its
# objects in .infrakit/simulator there, whatever the caller's environment says.
cd "$work"
export PATH="$bin:$PATH"
unset INFRAKIT_SIMULATOR_DIR INFRAKIT_PLUGIN_PATH

# step explains what comes next.
step() {
	echo
	echo "==> $*"
	if [[ "${PAUSE:-}" == 1 ]]; then
		read -r -p "    (Enter to run) " _
	fi
}

# run echoes a command, then runs it.
run() {
	echo "\$ $*"
	"$@"
}

# simulator_count prints how many instances the simulator holds: one JSON
# file each, read straight from its directory, without asking infrakit.
simulator_count() {
	local dir=.infrakit/simulator/instances/compute n=0
	if [[ -d "$dir" ]]; then
		n="$(find "$dir" -maxdepth 1 -name '*.json' ! -name '.*' | wc -l)"
	fi
	echo "    the simulator holds $n instances (files in $dir)"
}

# await_watch waits (up to 60s) until the watch started in the background
# serves its status and, when curl is there to ask, has made its first pass.
await_watch() {
	local api="" passes
	for _ in $(seq 600); do
		api="$(sed -n 's|.*serving \(http://[^ ]*/v1/status\).*|\1|p' watch.log | sed -n 1p)"
		if [[ -n "$api" ]]; then
			if ! command -v curl >/dev/null; then
				break
			fi
			passes="$(curl -s --max-time 2 -H "Authorization: Bearer $(cat .infrakit/api-token)" "$api" | tr -d ' \n' | sed -n 's/.*"passes":\([0-9]*\).*/\1/p')"
			if [[ -n "$passes" && "$passes" -gt 0 ]]; then
				echo "    watch serves $api and has made its first pass"
				return
			fi
		fi
		sleep 0.1
	done
	if [[ -z "$api" ]]; then
		echo "demo: watch did not start; its log:" >&2
		cat watch.log >&2
		exit 1
	fi
}

# member_ids prints the IDs of a group's instances, from `group describe`
# (header lines, a blank line, the column names "ID ...", then one row each).
member_ids() {
	infrakit group describe "$1" | awk '$1 == "ID" { table = 1; next } table { print $1 }'
}

step "The stack: testdata/e2e, copied into $work"
cp "$root"/testdata/e2e/*.hcl .
run ls

step "Install the providers the stack names from bin/ and pin their checksums in .infrakit.lock.hcl"
run infrakit init -plugin-dir "$bin"
run cat .infrakit.lock.hcl

step "Check the stack: syntax, references, and each provider's opinion of its properties"
run infrakit validate

step "What would apply do? Nothing exists yet, so: create both groups, publish the routes, and register and authorize each new member once it runs"
run infrakit plan

step "Apply it: the plan's steps run, at most 10 provider calls at once: 5 miners and 10 cattle provisioned by the simulator and prepared by vanilla, the routes published, and each member registered on its load balancers (and each cattle member authorized) as soon as it runs. The Resources line counts what the Plan line promised"
run infrakit apply -auto-approve
simulator_count

step "The load balancers, asked directly: lb2 publishes one route; lb1 routes to the miners, lb3 to the cattle"
run infrakit lb routes ls lb2
run infrakit lb backends ls lb1
run infrakit lb backends ls lb3

step "The NFS authorizations: one per cattle member, its properties rendered from the member (host = member.id)"
run infrakit enrollment describe nfs

step "Now the plan is empty: the world matches the stack"
run infrakit plan

step "The groups, as the providers report them now"
run infrakit group ls

step "One group's instances: state, health and the tags the stack gave them"
run infrakit group describe miners

step "A group's desired size, then a new one: scale waits until the group has it"
run infrakit group scale miners
run infrakit group scale miners 8
simulator_count

step "Scaling returned with the load balancers already following: lb1 and lb2 now route to 8 miners"
run infrakit lb backends ls lb1 -json

step "Destroy two chosen cattle: each is revoked and taken out of lb3 first, then drained (after the group's drain_delay, 3s by default, for requests in flight) and destroyed; the group shrinks to 8 and does not grow them back"
mapfile -t victims < <(member_ids cattle | head -n 2)
run infrakit group destroy-instances cattle "${victims[@]}"
run infrakit group ls
simulator_count

step "Their backends on lb3 and their NFS authorizations went with them"
run infrakit lb backends ls lb3
run infrakit enrollment describe nfs

step "The scaled sizes live in the state; the stack files still say 5 and 10, so plan offers to go back"
run infrakit plan

step "Free the miners: infrakit stops managing them and touches nothing"
run infrakit group free miners
run infrakit group ls
simulator_count

step "While a group is free, plan shows that apply would manage it again"
run infrakit plan

step "Apply: management resumes and both groups return to the sizes in the stack files"
run infrakit apply -auto-approve
run infrakit group ls
simulator_count

step "The ingress as a whole: every load balancer, its routes and its backends"
run infrakit ingress describe test.com

step "Self-healing: start the watch service in the background (in production systemd runs it; see website/watch.md)"
echo "\$ infrakit watch -interval 5s -listen 127.0.0.1:0 &"
infrakit watch -interval 5s -listen 127.0.0.1:0 >watch.log 2>&1 &
watch_pid=$!
trap 'kill -TERM "$watch_pid" 2>/dev/null || true' ERR
await_watch
ui="$(sed -n 's|.*the web UI is at \(http://[^ ]*\).*|\1|p' watch.log | sed -n 1p)"
if [[ -n "$ui" ]]; then
	echo "    its web UI is at $ui (sign in with the token in $work/.infrakit/api-token)"
	if command -v curl >/dev/null; then
		page="$(curl -s --max-time 5 -b "infrakit_token=$(cat .infrakit/api-token)" "$ui")"
		if [[ "$page" != *'data-group="cattle"'* || "$page" != *'data-group="miners"'* ]]; then
			echo "demo: the web UI at $ui does not show the groups; its log:" >&2
			kill -TERM "$watch_pid" 2>/dev/null || true
			cat watch.log >&2
			exit 1
		fi
		echo "    the web UI's overview lists both groups"
	fi
fi

step "Remove three cattle behind infrakit's back: delete their files from the simulator's store"
mapfile -t vanished < <(member_ids cattle | head -n 3)
for id in "${vanished[@]}"; do
	run rm ".infrakit/simulator/instances/compute/$id.json"
done
simulator_count

step "watch sees them vanish (the simulator pushes an event) and replaces them; lb3 and the authorizations follow"
healed=""
for _ in $(seq 1 150); do
	ids="$(member_ids cattle | sort | tr '\n' ' ')"
	backends="$(infrakit lb backends ls lb3 -json | tr -d '[:space:]')"
	auths="$(infrakit enrollment describe nfs -json | tr -d '[:space:]')"
	gone=0
	for id in "${vanished[@]}"; do
		[[ "$ids" == *"$id"* || "$backends" == *"$id"* || "$auths" == *"$id"* ]] && gone=1
	done
	if [[ "$gone" == 0 && "$(wc -w <<<"$ids")" == 10 && "$(grep -o '"source_id"' <<<"$auths" | wc -l)" == 10 ]]; then
		healed=1
		break
	fi
	sleep 0.2
done
if [[ -z "$healed" ]]; then
	echo "demo: watch did not heal the cattle; its log:" >&2
	cat watch.log >&2
	exit 1
fi
run infrakit group ls
run infrakit lb backends ls lb3
run infrakit enrollment describe nfs
simulator_count

step "Stop watch with SIGTERM: it finishes its pass, saves the state, stops its providers and exits 0"
echo "\$ kill -TERM $watch_pid"
kill -TERM "$watch_pid"
wait "$watch_pid" && echo "    watch exited with status 0"
trap - ERR
tail -n 3 watch.log

step "Destroy the miners' group alone: its members leave lb1 and lb2, are drained, then destroyed; lb1 and lb2 are left with no backends"
run infrakit group destroy miners -auto-approve
run infrakit lb backends ls lb1

step "Destroy everything the stack made: every member is revoked and deregistered, then drained and destroyed, and the routes are unpublished"
run infrakit destroy -auto-approve
simulator_count
run infrakit lb routes ls lb3
run infrakit enrollment describe nfs

step "Done. Next: the language reference (website/language.md) and the CLI (website/cli.md)"
echo
echo "The web UI (website/ui.md) was at $ui while watch ran in $work (token: its .infrakit/api-token)."
echo "Run 'infrakit watch' in a stack directory you applied and open http://127.0.0.1:24864/ (token: .infrakit/api-token there)."
