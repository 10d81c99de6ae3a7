#!/usr/bin/env bash
# A narrated walk through infrakit on the local Docker Engine: the stack of
# testdata/docker (3 web containers, health-checked, behind HAProxy, enrolled
# into an exports file), in a scratch directory, with the binaries `make
# build` put in bin/. Run it with `make demo-docker`. KEEP=1 keeps the
# scratch directory; PAUSE=1 waits for Enter before each step.
#
# What it shows: the image built FROM scratch (no registry), apply, the
# containers labelled with their group, `infrakit watch` replacing a
# container killed with `docker kill`, two removed with `docker rm -f`, and
# one that fails its HTTP health check; scaling to 6; destroy leaving no
# container of the stack behind.
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

work="$(mktemp -d "${TMPDIR:-/tmp}/infrakit-demo-docker.XXXXXX")"
watch_pid=""
label="infrakit.stack=docker"
cleanup() {
	if [[ -n "$watch_pid" ]]; then
		kill "$watch_pid" 2>/dev/null || true
		wait "$watch_pid" 2>/dev/null || true
	fi
	# Whatever a failed step left: the stack's containers, by label.
	left="$(docker ps -aq --filter "label=$label")"
	if [[ -n "$left" ]]; then
		docker rm -f $left >/dev/null || true
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
unset INFRAKIT_PLUGIN_PATH INFRAKIT_DOCKER_DIR INFRAKIT_HAPROXY_DIR
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
sleep 2
tail -n 3 watch.log

step "docker kill one container: watch replaces it"
victim="$(running_ids | head -n 1)"
run docker kill "$victim"
await_group 3 "$victim"
containers

step "docker rm -f two containers: both are replaced"
mapfile -t victims < <(running_ids | head -n 2)
run docker rm -f "${victims[@]}"
await_group 3 "${victims[@]}"

step "Make one container fail its HTTP health check (POST /fail): after the group's 5s grace, watch replaces it"
sick="$(running_ids | head -n 1)"
ip="$(ip_of "$sick")"
echo "\$ curl -s -X POST http://$ip:8080/fail"
curl -s --max-time 2 -X POST "http://$ip:8080/fail"
echo "\$ curl -s http://$ip:8080/health"
curl -s --max-time 2 "http://$ip:8080/health" || true
await_group 3 "$sick"

step "Requests through HAProxy on 127.0.0.1:18080, if the ingress is being kept by this build's watch"
if curl -s --max-time 2 http://127.0.0.1:18080/ >/dev/null 2>&1; then
	for _ in 1 2 3 4 5 6; do curl -s --max-time 2 http://127.0.0.1:18080/; done
	run infrakit lb backends ls web
else
	echo "    (nothing listens on 127.0.0.1:18080 yet: this build's watch does not keep ingresses)"
fi
if [[ -s "$INFRAKIT_NFS_EXPORTS_FILE" ]]; then
	run cat "$INFRAKIT_NFS_EXPORTS_FILE"
fi

step "Scale to 6: six containers labelled infrakit.group=web"
run infrakit group scale web 6
run docker ps --filter "label=infrakit.group=web" --format '{{.ID}} {{.Names}} {{.Status}}'

step "What watch saw and did"
grep -E 'vanished|replacing|created instance|unhealthy' watch.log | tail -n 12 || true

step "Stop watch, then destroy: no container of the stack is left"
kill "$watch_pid"
wait "$watch_pid" || true
watch_pid=""
run infrakit destroy -auto-approve
run docker ps -a --filter "label=$label" --format '{{.ID}} {{.Names}}'
echo "    $(docker ps -aq --filter "label=$label" | wc -l) containers carry $label"
