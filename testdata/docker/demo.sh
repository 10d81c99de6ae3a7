#!/usr/bin/env bash
# A narrated walk through infrakit on the local Docker Engine: the stack of
# testdata/docker (3 web containers, health-checked, behind HAProxy, enrolled
# into an exports file), in a scratch directory, with the binaries `make
# build` put in bin/. Run it with `make demo-docker`. KEEP=1 keeps the
# scratch directory; PAUSE=1 waits for Enter before each step.
#
# What it shows: the image built FROM scratch (no registry), apply, the
# containers labelled with their group and answering through HAProxy on
# 127.0.0.1:18080, `infrakit watch` replacing a container killed with
# `docker kill`, two removed with `docker rm -f`, and one that fails its
# HTTP health check (make before break: its replacement runs healthy and
# serves before it is taken out of HAProxy, drained and stopped), while
# requests keep flowing through HAProxy and its backends follow; scaling to
# 6 and back to 3 (the containers leaving are deregistered, drained, then
# stopped, so no request fails); destroy leaving no container of the stack
# behind.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
bin="$root/bin"
for b in infrakit infrakit-provider-docker infrakit-provider-healthcheck infrakit-provider-haproxy infrakit-provider-nfsexports; do
	if [[ ! -x "$bin/$b" ]]; then
		echo "demo-docker: $bin/$b is missing; run 'make build' (or 'make demo-docker') first" >&2
		exit 1
	fi
done
if ! docker version >/dev/null 2>&1; then
	echo "demo-docker: no Docker Engine answers (docker version failed)" >&2
	exit 1
fi

lb="127.0.0.1:18080" # the ingress's lb_port in stack.hcl
if (exec 3<>"/dev/tcp/${lb%:*}/${lb#*:}") 2>/dev/null; then
	echo "demo-docker: something already listens on $lb, where the stack's HAProxy frontend goes; stop it first" >&2
	exit 1
fi

work="$(mktemp -d "${TMPDIR:-/tmp}/infrakit-demo-docker.XXXXXX")"
watch_pid=""
traffic_pid=""
label="infrakit.stack=docker"
cleanup() {
	for pid in "$traffic_pid" "$watch_pid"; do
		if [[ -n "$pid" ]]; then
			kill "$pid" 2>/dev/null || true
			wait "$pid" 2>/dev/null || true
		fi
	done
	# Whatever a failed step left: the stack's containers, by label.
	left="$(docker ps -aq --filter "label=$label")"
	if [[ -n "$left" ]]; then
		docker rm -f $left >/dev/null || true
	fi
	# The haproxy provider runs HAProxy as a daemon that outlives it (a
	# load balancer stays up while infrakit is not running); the demo's
	# goes with the demo, if the pid file still names it.
	local ha="${INFRAKIT_HAPROXY_DIR:-}" pid
	if [[ -n "$ha" && -s "$ha/haproxy.pid" ]]; then
		pid="$(<"$ha/haproxy.pid")"
		if tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q "haproxy.*$ha"; then
			kill "$pid" 2>/dev/null || true
		fi
	fi
	if [[ "${KEEP:-}" == 1 ]]; then
		echo
		echo "==> scratch directory kept: $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT

cd "$work"
export PATH="$bin:$PATH"
unset INFRAKIT_PLUGIN_PATH INFRAKIT_DOCKER_DIR
# HAProxy's state and sockets (the provider's default is .infrakit/haproxy
# in the stack directory; named here so cleanup finds the daemon).
export INFRAKIT_HAPROXY_DIR="$work/.infrakit/haproxy"
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

# containers lists the stack's running containers.
containers() {
	docker ps --filter "label=$label" --format 'table {{.ID}}\t{{.Names}}\t{{.Status}}\t{{.Label "infrakit.group"}}'
}

# running_ids prints the IDs of the stack's running containers.
running_ids() { docker ps -q --filter "label=$label" --filter status=running; }

# ip_of prints a container's IP on the bridge network.
ip_of() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}' "$1"; }

# through_lb N prints what N requests through HAProxy answer.
through_lb() {
	echo "\$ for i in \$(seq $1); do curl -s http://$lb/; done"
	for _ in $(seq "$1"); do curl -s --max-time 10 "http://$lb/"; done
}

# await_backends waits (up to 60s) until HAProxy's backends, as the provider
# reports them, are exactly the running containers, and prints how long.
await_backends() {
	local start want got
	start="$(now_ms)"
	while true; do
		want="$(running_ids | sort | tr '\n' ' ')"
		got="$(infrakit lb backends ls web -json | grep -oE '[0-9a-f]{12}' | sort | tr '\n' ' ')"
		if [[ -n "$want" && "$want" == "$got" ]]; then
			echo "    HAProxy's backends are the running containers after $(($(now_ms) - start)) ms"
			return
		fi
		if (($(now_ms) - start > 60000)); then
			echo "demo-docker: backends [$got] are not the containers [$want] after 60s" >&2
			tail -n 20 watch.log >&2 || true
			exit 1
		fi
		sleep 0.2
	done
}

# traffic_summary counts the answers of the requests sent in the background.
traffic_summary() {
	local ok failed
	ok="$(grep -c '^200$' traffic.log || true)"
	failed="$(grep -vc '^200$' traffic.log || true)"
	echo "    requests through HAProxy since watch started: $ok answered, $failed failed"
}

# await_watch waits (up to 60s) until the watch started in the background
# serves its status and has made its first pass.
await_watch() {
	local api="" passes
	for _ in $(seq 600); do
		api="$(sed -n 's|.*serving \(http://[^ ]*/v1/status\).*|\1|p' watch.log | sed -n 1p)"
		if [[ -n "$api" ]]; then
			passes="$(curl -s --max-time 2 -H "Authorization: Bearer $(cat .infrakit/api-token)" "$api" | tr -d ' \n' | sed -n 's/.*"passes":\([0-9]*\).*/\1/p')"
			if [[ -n "$passes" && "$passes" -gt 0 ]]; then
				return
			fi
		fi
		sleep 0.1
	done
	echo "demo-docker: watch did not make its first pass within 60s; its log:" >&2
	cat watch.log >&2
	exit 1
}

# await_group N GONE... waits (up to 60s) until N containers run and none of
# GONE does, and prints how long that took.
await_group() {
	local want="$1" start
	shift
	start="$(now_ms)"
	while true; do
		local ids n ok=1
		ids="$(running_ids)"
		n="$(grep -c . <<<"$ids" || true)"
		for gone in "$@"; do
			if grep -q "^${gone:0:12}" <<<"$ids"; then ok=0; fi
		done
		if [[ "$n" == "$want" && "$ok" == 1 ]]; then
			echo "    $want containers running after $(($(now_ms) - start)) ms"
			return
		fi
		if (($(now_ms) - start > 60000)); then
			echo "demo-docker: still $n containers (want $want) after 60s" >&2
			tail -n 20 watch.log >&2 || true
			exit 1
		fi
		sleep 0.1
	done
}

step "Build the image infrakit-docker-web:latest: a static Go binary FROM scratch, no registry"
run "$root/testdata/docker/build-image.sh"
run docker images infrakit-docker-web

step "The stack: testdata/docker/stack.hcl, copied into $work"
cp "$root/testdata/docker/stack.hcl" .
run cat stack.hcl

step "Install the providers from bin/, then check the stack with each of them"
run infrakit init -plugin-dir "$bin"
run infrakit validate

step "Apply: 3 containers, each labelled with the stack, the group and its config hash"
run infrakit apply -auto-approve
containers
run docker ps --filter "label=infrakit.group=web" --format '{{.ID}} {{.Label "infrakit.config.hash"}}'

step "HAProxy on $lb balances requests over the three containers (each answers with its instance ID)"
through_lb 6
run infrakit lb backends ls web

step "Each container answers on its own bridge IP (its hostname is its instance ID)"
for id in $(running_ids); do
	ip="$(ip_of "$id")"
	echo "\$ curl -s http://$ip:8080/"
	curl -s --max-time 2 "http://$ip:8080/"
done
run infrakit group describe web

step "Start infrakit watch in the background: Docker's event stream tells it at once when a container dies"
infrakit watch >watch.log 2>&1 &
watch_pid=$!
await_watch
tail -n 3 watch.log
echo "    (from now on a request goes through HAProxy every 50 ms in the background; failures are counted)"
(
	while true; do
		curl -s -o /dev/null -w '%{http_code}\n' --max-time 30 "http://$lb/" || true
		sleep 0.05
	done
) >traffic.log 2>/dev/null &
traffic_pid=$!

step "docker kill one container: watch replaces it"
victim="$(running_ids | head -n 1)"
run docker kill "$victim"
await_group 3 "$victim"
await_backends
containers

step "docker rm -f two containers: both are replaced"
mapfile -t victims < <(running_ids | head -n 2)
run docker rm -f "${victims[@]}"
await_group 3 "${victims[@]}"
await_backends

step "Make one container fail its HTTP health check (POST /fail): after the group's 5s grace, watch replaces it, make before break: the new container runs healthy and is registered before the sick one is deregistered, drained (drain_delay, 3s by default) and stopped"
sick="$(running_ids | head -n 1)"
ip="$(ip_of "$sick")"
echo "\$ curl -s -X POST http://$ip:8080/fail"
curl -s --max-time 2 -X POST "http://$ip:8080/fail"
echo "\$ curl -s http://$ip:8080/health"
curl -s --max-time 2 "http://$ip:8080/health" || true
await_group 3 "$sick"
await_backends

step "Through all of it HAProxy kept answering, from the new containers too; the exports file follows as well"
through_lb 6
run infrakit lb backends ls web
traffic_summary
run cat "$INFRAKIT_NFS_EXPORTS_FILE"

step "Scale to 6: six containers labelled infrakit.group=web"
run infrakit group scale web 6
run docker ps --filter "label=infrakit.group=web" --format '{{.ID}} {{.Names}} {{.Status}}'
await_backends

step "Scale back to 3: the three containers leaving are taken out of HAProxy and the exports first, drained after 3s, then stopped"
run infrakit group scale web 3
await_group 3
await_backends

step "What watch saw and did"
grep -E 'vanished|replacing|created instance|unhealthy' watch.log | tail -n 12 || true

step "Stop watch, then destroy: no container of the stack is left"
kill "$traffic_pid"
wait "$traffic_pid" 2>/dev/null || true
traffic_pid=""
traffic_summary
kill "$watch_pid"
wait "$watch_pid" || true
watch_pid=""
run infrakit destroy -auto-approve
run docker ps -a --filter "label=$label" --format '{{.ID}} {{.Names}}'
echo "    $(docker ps -aq --filter "label=$label" | wc -l) containers carry $label"
