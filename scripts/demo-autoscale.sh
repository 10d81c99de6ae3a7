#!/usr/bin/env bash
# Metrics-driven autoscaling on this machine: the stack of testdata/autoscale
# (web server processes behind HAProxy, scraped by a real Prometheus that
# finds them in the file_sd file an enrollment keeps, sized by their request
# rate between 2 and 4), in a scratch directory, with the binaries `make
# build` put in bin/. Run it with `make demo-autoscale` (HAProxy and
# Prometheus must be installed: apt-get install haproxy prometheus). It runs
# unattended and ends by itself in a few minutes. KEEP=1 keeps the scratch
# directory.
#
# What it shows: Prometheus started on a free loopback port, reading the
# stack directory's prometheus/*.json; apply creating 2 web servers, each
# enrolled into prometheus/web.json and scraped; `infrakit watch` evaluating
# the check every second, with a line per decision it records; a bounded
# load (curl at 60 requests per second through HAProxy: 12 instances worth
# at 5 per instance) growing the group to its max of 4, and Prometheus
# scraping the new members; the load dropping to a trickle, and the group
# shrinking one member at a time back to 2 after the 5 s stabilization
# window, with no request failing; `infrakit group describe web` showing
# the last decisions. On the way out it stops what it started, by PID: the
# load, watch, the web servers, the HAProxy the provider started and
# Prometheus.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$root/bin"
for b in infrakit infrakit-provider-process infrakit-provider-healthcheck infrakit-provider-haproxy infrakit-provider-prometheus; do
	if [[ ! -x "$bin/$b" ]]; then
		echo "demo-autoscale: $bin/$b is missing; run 'make build' (or 'make demo-autoscale') first" >&2
		exit 1
	fi
done
if ! command -v haproxy >/dev/null && [[ ! -x /usr/sbin/haproxy ]]; then
	echo "demo-autoscale: HAProxy is not installed (apt-get install haproxy)" >&2
	exit 1
fi
prometheus="$(command -v prometheus || true)"
if [[ -z "$prometheus" && -x /usr/bin/prometheus ]]; then
	prometheus=/usr/bin/prometheus
fi
if [[ -z "$prometheus" ]]; then
	echo "demo-autoscale: Prometheus is not installed (apt-get install prometheus)" >&2
	exit 1
fi
for c in curl go; do
	if ! command -v "$c" >/dev/null; then
		echo "demo-autoscale: $c is not in PATH" >&2
		exit 1
	fi
done

work="$(mktemp -d "${TMPDIR:-/tmp}/infrakit-demo-autoscale.XXXXXX")"
watch_pid=""
load_pid=""
prom_pid=""

# pid_of, is_ours, stop_webservers, stop_haproxy
source "$root/scripts/lib/local-processes.sh"

# stop_pid PID: SIGTERM, then SIGKILL if it has not exited within 10 s.
stop_pid() {
	kill "$1" 2>/dev/null || return 0
	for _ in $(seq 100); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}

cleanup() {
	set +e
	[[ -n "$load_pid" ]] && stop_pid "$load_pid"
	[[ -n "$watch_pid" ]] && stop_pid "$watch_pid"
	# Whatever a failed step left: the web servers the process provider
	# recorded (each the leader of its own process group) ...
	stop_webservers
	# ... the HAProxy the haproxy provider started, which outlives every
	# infrakit command by design (its master stops its workers) ...
	stop_haproxy
	# ... and Prometheus.
	[[ -n "$prom_pid" ]] && stop_pid "$prom_pid"
	if [[ "${KEEP:-}" == 1 ]]; then
		echo
		echo "==> scratch directory kept: $work"
	else
		rm -rf "$work"
	fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

cd "$work"
export PATH="$bin:$PATH"
unset INFRAKIT_PLUGIN_PATH INFRAKIT_PROCESS_DIR INFRAKIT_HAPROXY_DIR INFRAKIT_HAPROXY_CONFIG INFRAKIT_HAPROXY_MASTER_SOCKET INFRAKIT_PROMETHEUS_DIR

step() {
	echo
	echo "==> $*"
}

run() {
	echo "\$ $*"
	"$@"
}

now_ms() { date +%s%3N; }

# free_port N prints the first port from N on that nothing on 127.0.0.1
# answers.
free_port() {
	local port="$1"
	while (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
		port=$((port + 1))
	done
	echo "$port"
}

records=.infrakit/process/instances

# running counts the recorded web servers whose process runs and that are
# not being destroyed.
running() {
	local rec pid n=0
	for rec in "$records"/*.json; do
		[[ -e "$rec" ]] || continue
		grep -q '"terminating": *true' "$rec" && continue
		pid="$(pid_of "$rec")"
		if [[ -n "$pid" ]] && is_ours "$pid" webserver; then
			n=$((n + 1))
		fi
	done
	echo "$n"
}

# targets prints a line per target Prometheus scrapes (its active targets:
# a target leaves them once Prometheus has read that the member left the
# file, which its discovery passes on every 5 s at most): the member's
# instance ID, where it is scraped, and whether its last scrape succeeded.
targets() {
	curl -s --max-time 2 "$prom/api/v1/targets?state=active" |
		sed 's/},{"discoveredLabels"/}\n{"discoveredLabels"/g' |
		sed -nE 's/.*"infrakit_instance":"([^"]*)".*"scrapeUrl":"([^"]*)".*"health":"([a-z]*)".*/\1 \2 \3/p'
}

# scraped counts the targets Prometheus scrapes and found up, when it
# scrapes no other.
scraped() {
	local t
	t="$(targets)"
	if [[ "$(grep -c . <<<"$t")" == "$(grep -c ' up$' <<<"$t")" ]]; then
		grep -c ' up$' <<<"$t"
	fi
}

show_scraped() {
	echo "\$ curl -s '$prom/api/v1/targets?state=active'   # abridged: instance, scrape URL, health"
	targets | sed 's/^/    /'
}

# decisions_shown is how many of watch's autoscale log lines were printed.
decisions_shown=0

# show_decisions prints the autoscale decisions watch logged since the last
# call, one progress line each (watch logs a decision at info when it
# differs from the one before; a repeated hold is not repeated).
show_decisions() {
	local lines n
	[[ -e watch.log ]] || return 0
	lines="$(grep 'autoscale: ' watch.log || true)"
	n="$(grep -c . <<<"$lines" || true)"
	if ((n > decisions_shown)); then
		tail -n "$((n - decisions_shown))" <<<"$lines" |
			sed -E 's/^[0-9-]+T([0-9:]+)[.0-9]*Z? .*autoscale: ([a-z-]+): group=[^ ]+ current=([0-9]+) desired=([0-9]+) reason="?([^"]*)"?$/\1\t\2\t\3\t\4\t\5/' |
			while IFS=$'\t' read -r at action current desired reason; do
				printf '    %s  %-10s %s -> %s  %s\n' "$at" "$action" "$current" "$desired" "$reason"
			done
		decisions_shown="$n"
	fi
}

# await WHAT SECONDS CMD...: runs CMD every 0.2 s, printing the decisions
# as they come, until it succeeds; fails the demo after SECONDS.
await() {
	local what="$1" bound="$2" start
	shift 2
	start="$(now_ms)"
	until "$@"; do
		show_decisions
		if (($(now_ms) - start > bound * 1000)); then
			echo "demo-autoscale: $what: not within ${bound}s" >&2
			tail -n 30 watch.log >&2 || true
			exit 1
		fi
		sleep 0.2
	done
	show_decisions
	echo "    $what after $(($(now_ms) - start)) ms"
}

size_is() { [[ "$(running)" == "$1" ]]; }
scraped_is() { [[ "$(scraped)" == "$1" ]]; }
size_and_scraped() { size_is "$1" && scraped_is "$1"; }

# start_load RATE COUNT SECONDS: curl sends COUNT requests through HAProxy
# at RATE per second, for SECONDS at most (a bounded load: it ends by
# itself), writing each status code
# (000: no answer) to load.out as it comes: to curl's stderr, which is not
# buffered, so stopping curl loses none.
start_load() {
	: >load.out
	timeout "$3" curl -s --rate "$1/s" --max-time 5 -o /dev/null -w '%{stderr}%{http_code}\n' "$url/?n=[1-$2]" 2>>load.out &
	load_pid=$!
}

# stop_load stops the load and says how many requests failed.
stop_load() {
	stop_pid "$load_pid"
	load_pid=""
	local total ok
	total="$(grep -c . load.out || true)"
	ok="$(grep -c '^200$' load.out || true)"
	echo "    $total requests through HAProxy $1, $((total - ok)) failed"
	failed=$((failed + total - ok))
}
failed=0

step "Build the web server the instances run (testdata/webserver, which counts its requests at /metrics) into bin/"
run go build -C "$root" -o "$bin/webserver" ./testdata/webserver

step "Start Prometheus on loopback, scraping every second the targets listed in $work/prometheus/*.json"
prom_port="$(free_port 19090)"
prom="http://127.0.0.1:$prom_port"
mkdir -p prometheus-server
cat >prometheus-server/prometheus.yml <<EOF
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: infrakit
    file_sd_configs:
      - files: ["$work/prometheus/*.json"]
        refresh_interval: 1s
EOF
run cat prometheus-server/prometheus.yml
echo "\$ prometheus --config.file=prometheus-server/prometheus.yml --web.listen-address=127.0.0.1:$prom_port ... &"
"$prometheus" --config.file=prometheus-server/prometheus.yml --storage.tsdb.path=prometheus-server/data \
	--web.listen-address="127.0.0.1:$prom_port" >prometheus-server/prometheus.log 2>&1 &
prom_pid=$!
prom_ready() { curl -sf --max-time 2 -o /dev/null "$prom/-/ready"; }
await "Prometheus ready at $prom" 60 prom_ready

step "The stack: testdata/autoscale/stack.hcl, copied into $work"
cp "$root/testdata/autoscale/stack.hcl" .
port="$(free_port 18090)"
if [[ "$port" != 18090 ]]; then
	sed -i "s/lb_port\( *\)= 18090/lb_port\1= $port/" stack.hcl
	echo "    (127.0.0.1:18090 is taken: the demo uses lb_port $port)"
fi
url="http://127.0.0.1:$port"
sed -n '/^group "web"/,/^}/p' stack.hcl
run tee infrakit.ivars <<<"prometheus_address = \"$prom\""

step "Install the providers from bin/, check the stack (the prometheus provider checks the query with Prometheus), apply: 2 web servers"
run infrakit init -plugin-dir "$bin"
run infrakit validate
run infrakit apply -auto-approve
echo "\$ cat prometheus/web.json   # what the scrape enrollment keeps: one target per member"
sed -n '/"targets"/,/]/p' prometheus/web.json
await "Prometheus scraping the 2 members" 60 scraped_is 2

step "Start infrakit watch in the background: it evaluates the rps check every second (its decisions follow)"
infrakit watch -listen 127.0.0.1:0 -interval 2s >watch.log 2>&1 &
watch_pid=$!
has_decision() { grep -q 'autoscale: ' watch.log; }
await "a first decision" 60 has_decision

step "Load: 60 requests per second through HAProxy on $url (at most 3600 requests, 90 s): 12 instances' worth, so the group grows to its max of 4"
start_load 60 3600 90
await "4 web servers, all 4 scraped by Prometheus" 90 size_and_scraped 4
run infrakit lb backends ls web
show_scraped

step "The load drops to a trickle of 2 requests per second: after the 5 s stabilization window, the group shrinks one member per decision (cooldown 3 s) back to its min of 2"
stop_load "under load"
start_load 2 300 150
await "2 web servers, 2 scraped by Prometheus" 120 size_and_scraped 2
stop_load "during the scale-down"
show_scraped

step "The decisions, as group describe shows them (from the local watch's /v1/status)"
run infrakit group describe web

step "Stop watch, destroy, stop Prometheus"
stop_pid "$watch_pid"
watch_pid=""
run infrakit destroy -auto-approve
stop_haproxy
stop_pid "$prom_pid"
prom_pid=""
echo "    $(running) web servers running; $failed requests failed in all"
if ((failed > 0)); then
	echo "demo-autoscale: $failed requests through HAProxy failed" >&2
	exit 1
fi
