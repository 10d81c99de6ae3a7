#!/usr/bin/env bash
# A narrated walk through infrakit with real providers on this machine: the
# stack of testdata/real (3 web server processes, health-checked over HTTP,
# behind HAProxy, enrolled into an NFS exports file), in a scratch
# directory, with the binaries `make build` put in bin/. Run it with
# `make demo-real` (HAProxy must be installed: apt-get install haproxy).
# KEEP=1 keeps the scratch directory; PAUSE=1 waits for Enter before each
# step.
#
# What it shows: the web server built and put in PATH, apply, requests
# through HAProxy answered by each process in turn, `infrakit watch`
# replacing a process killed with `kill -9` while requests keep flowing,
# HAProxy's backends and the exports file following, scaling to 5, a
# process that fails its HTTP health check replaced make before break, a
# scale down to 2 in which no request fails (each process leaving is taken
# out of HAProxy and the exports, drained, then stopped), and destroy
# leaving no process behind. On the way out it stops what it started: watch, the
# web servers and the HAProxy the provider started.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/bin"
for b in infrakit infrakit-provider-process infrakit-provider-healthcheck infrakit-provider-haproxy infrakit-provider-nfsexports; do
	if [[ ! -x "$bin/$b" ]]; then
		echo "demo-real: $bin/$b is missing; run 'make build' (or 'make demo-real') first" >&2
		exit 1
	fi
done
if ! command -v haproxy >/dev/null && [[ ! -x /usr/sbin/haproxy ]]; then
	echo "demo-real: HAProxy is not installed (apt-get install haproxy)" >&2
	exit 1
fi
for c in curl go; do
	if ! command -v "$c" >/dev/null; then
		echo "demo-real: $c is not in PATH" >&2
		exit 1
	fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/infrakit-demo-real.XXXXXX")"
watch_pid=""
traffic_pid=""

# pid_of, is_ours, stop_webservers, stop_haproxy
source "$root/scripts/lib/local-processes.sh"

cleanup() {
	set +e
	if [[ -n "$traffic_pid" ]]; then
		kill "$traffic_pid" 2>/dev/null
		wait "$traffic_pid" 2>/dev/null
	fi
	if [[ -n "$watch_pid" ]]; then
		kill "$watch_pid" 2>/dev/null
		wait "$watch_pid" 2>/dev/null
	fi
	# Whatever a failed step left: the web servers the process provider
	# recorded (each the leader of its own process group) ...
	stop_webservers
	# ... and the HAProxy the haproxy provider started, which outlives
	# every infrakit command by design (its master stops its workers).
	stop_haproxy
	if [[ "${KEEP:-}" == 1 ]]; then
		echo
		echo "==> scratch directory kept: $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
# A signal ends the demo once the command in flight has finished (bash
# waits for it before running the trap), so cleanup never races a command
# that is still creating processes.
trap 'exit 130' INT
trap 'exit 143' TERM

cd "$work"
# bin/ first on PATH: the commands shown are the ones a user would type,
# and the process provider finds `webserver` there.
export PATH="$bin:$PATH"
unset INFRAKIT_PLUGIN_PATH INFRAKIT_PROCESS_DIR INFRAKIT_HAPROXY_DIR INFRAKIT_HAPROXY_CONFIG INFRAKIT_HAPROXY_MASTER_SOCKET
# The exports file lives in the scratch directory, and exportfs is not run:
# the demo shows the file, it does not serve NFS.
export INFRAKIT_NFS_EXPORTS_FILE="$work/infrakit.exports" INFRAKIT_NFS_EXPORTFS=none

step() {
	echo
	echo "==> $*"
	if [[ "${PAUSE:-}" == 1 ]]; then
		read -r -p "    (Enter to run) " _
	fi
}

run() {
	echo "\$ $*"
	"$@"
}

now_ms() { date +%s%3N; }

# start_traffic sends requests through HAProxy in the background, one after
# the other, until stop_traffic, which says how many failed.
start_traffic() {
	rm -f traffic.stop
	(
		ok=0 bad=0
		while [[ ! -e traffic.stop ]]; do
			if curl -sf --max-time 2 -o /dev/null "$url/"; then ok=$((ok + 1)); else bad=$((bad + 1)); fi
		done
		echo "$ok $bad" >traffic.out
	) &
	traffic_pid=$!
	sleep 0.5 # requests flowing before the change
}

stop_traffic() {
	local ok bad
	touch traffic.stop
	wait "$traffic_pid" || true
	traffic_pid=""
	read -r ok bad <traffic.out
	echo "    $((ok + bad)) requests through HAProxy $1, $bad failed"
}

records=.infrakit/process/instances

# alive_ids prints the IDs of the recorded instances whose process runs.
alive_ids() {
	local rec pid
	for rec in "$records"/*.json; do
		[[ -e "$rec" ]] || continue
		pid="$(pid_of "$rec")"
		if [[ -n "$pid" ]] && is_ours "$pid" webserver; then
			basename "$rec" .json
		fi
	done
}

# await_group N GONE... waits (up to 60s) until N processes run and none
# of GONE does, and prints how long that took.
await_group() {
	local want="$1" start
	shift
	start="$(now_ms)"
	while true; do
		local ids n ok=1
		ids="$(alive_ids)"
		n="$(grep -c . <<<"$ids" || true)"
		for gone in "$@"; do
			if grep -qx "$gone" <<<"$ids"; then ok=0; fi
		done
		if [[ "$n" == "$want" && "$ok" == 1 ]]; then
			echo "    $want web servers running after $(($(now_ms) - start)) ms"
			return
		fi
		if (($(now_ms) - start > 60000)); then
			echo "demo-real: still $n web servers (want $want) after 60s" >&2
			tail -n 20 watch.log >&2 || true
			exit 1
		fi
		sleep 0.05
	done
}

# requests N sends N requests through HAProxy and counts who answered.
requests() {
	echo "\$ for i in \$(seq $1); do curl -s $url/; done | cut -d' ' -f1,2 | sort | uniq -c"
	for _ in $(seq "$1"); do curl -s --max-time 2 "$url/"; done | cut -d' ' -f1,2 | sort | uniq -c
}

# exports_show prints the exports file's export lines (the comment lines
# above each record the authorization).
exports_show() {
	echo "\$ grep -v '^#' $INFRAKIT_NFS_EXPORTS_FILE"
	grep -v '^#' "$INFRAKIT_NFS_EXPORTS_FILE" || echo "    (no exports)"
}

step "Build the web server the instances run (testdata/webserver) into bin/, which is on PATH"
run go build -C "$root" -o "$bin/webserver" ./testdata/webserver
run command -v webserver

step "The stack: testdata/real/stack.hcl, copied into $work"
cp "$root/testdata/real/stack.hcl" .
port=18090
# HAProxy needs a free port: take the next one if something holds 18090.
while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
	port=$((port + 1))
done
if [[ "$port" != 18090 ]]; then
	sed -i "s/lb_port\( *\)= 18090/lb_port\1= $port/" stack.hcl
	echo "    (127.0.0.1:18090 is taken: the demo uses lb_port $port)"
fi
url="http://127.0.0.1:$port"
run cat stack.hcl

step "Install the providers from bin/, then check the stack with each of them"
run infrakit init -plugin-dir "$bin"
run infrakit validate

step "Apply: 3 web server processes, HAProxy started with a route on $url; each process is registered with HAProxy and exported once it runs"
run infrakit apply -auto-approve
run infrakit group describe web

step "Each process listens on its own port from 21000-21999; its record says which, and its pid"
for rec in "$records"/*.json; do
	id="$(basename "$rec" .json)"
	p="$(sed -n 's/.*"port": *\([0-9][0-9]*\).*/\1/p' "$rec" | sed -n 1p)"
	echo "\$ curl -s http://127.0.0.1:$p/"
	curl -s --max-time 2 "http://127.0.0.1:$p/"
done

step "Requests through HAProxy on $url: each process answers in turn"
requests 9
run infrakit lb backends ls web
exports_show

step "Start infrakit watch in the background: the process provider reports an exit the moment it happens"
infrakit watch -listen 127.0.0.1:0 -interval 2s >watch.log 2>&1 &
watch_pid=$!
api=""
for _ in $(seq 300); do
	api="$(sed -n 's|.*serving \(http://[^ ]*/v1/status\).*|\1|p' watch.log | sed -n 1p)"
	if [[ -n "$api" ]] && curl -s --max-time 2 -H "Authorization: Bearer $(cat .infrakit/api-token)" "$api" | tr -d ' \n' | grep -q '"healthy":3'; then
		break
	fi
	sleep 0.1
done
head -n 2 watch.log
echo "    watch sees 3 healthy web servers ($api)"

step "kill -9 one web server while requests flow through HAProxy: watch replaces it"
start_traffic
victim="$(alive_ids | sed -n 1p)"
pid="$(pid_of "$records/$victim.json")"
run kill -9 "$pid"
await_group 3 "$victim"
sleep 1
stop_traffic "during the replacement"
run infrakit lb backends ls web
exports_show

step "Scale to 5: two more processes, registered with HAProxy and exported"
run infrakit group scale web 5
requests 15
exports_show

step "Make one process fail its HTTP health check: while fail/<its ID> exists, its /health answers 500"
start_traffic
sick="$(alive_ids | sed -n 1p)"
p="$(sed -n 's/.*"port": *\([0-9][0-9]*\).*/\1/p' "$records/$sick.json" | sed -n 1p)"
mkdir -p fail
run touch "fail/$sick"
echo "\$ curl -s http://127.0.0.1:$p/health"
curl -s --max-time 2 "http://127.0.0.1:$p/health" || true
echo "    once it has been unhealthy for the group's 2s grace, watch replaces it, make before break: the new"
echo "    process runs healthy and is registered and exported before the sick one is taken out of HAProxy"
echo "    and the exports, drained (after the group's drain_delay, 3s by default) and stopped"
await_group 5 "$sick"
stop_traffic "during the replacement"
run infrakit group describe web

step "What watch saw and did"
grep -E 'vanished|replacing|created instance|destroyed instance|unhealthy|followers' watch.log | cut -c1-160 | tail -n 16 || true

step "Scale down to 2 while requests flow: the 3 processes leaving are taken out of HAProxy and the exports, drained after 3s for the requests in flight, then stopped"
start_traffic
run infrakit group scale web 2
stop_traffic "during the scale-down"
run infrakit lb backends ls web
exports_show

step "Stop watch, then destroy: no web server, no export, no route is left"
kill "$watch_pid"
wait "$watch_pid" || true
watch_pid=""
run infrakit destroy -auto-approve
echo "    $(alive_ids | grep -c . || true) web servers running"
exports_show
echo "\$ curl -s $url/"
curl -s --max-time 2 "$url/" || echo "    (nothing answers: the route is unpublished)"

step "HAProxy itself keeps running (the provider never stops it); stop it by its pid file"
echo "\$ kill \"\$(cat .infrakit/haproxy/haproxy.pid)\""
stop_haproxy
echo "    HAProxy stopped"
