# Shell functions the demos that run real local processes share
# (demo-real.sh, demo-autoscale.sh): finding and stopping, by PID, what a
# demo started in its scratch directory $work. Sourced, not run.

# pid_of prints the pid a process provider record holds.
pid_of() { sed -n 's/.*"pid": *\([0-9][0-9]*\).*/\1/p' "$1" | sed -n 1p; }

# is_ours PID WORD: /proc/PID/cmdline names WORD (a recorded pid is not
# trusted alone: the kernel reuses pids).
is_ours() { [[ -r "/proc/$1/cmdline" ]] && tr '\0' ' ' <"/proc/$1/cmdline" | grep -q -- "$2"; }

# stop_webservers kills the web servers the process provider recorded in
# $work (each the leader of its own process group): whatever a failed step
# left.
stop_webservers() {
	local rec pid
	for rec in "$work"/.infrakit/process/instances/*.json; do
		[[ -e "$rec" ]] || continue
		pid="$(pid_of "$rec")"
		if [[ -n "$pid" ]] && is_ours "$pid" webserver; then
			kill -KILL -- "-$pid" 2>/dev/null || kill -KILL "$pid" 2>/dev/null
		fi
	done
}

# stop_haproxy stops the HAProxy master named in the provider's pid file,
# once its command line shows it runs this demo's configuration. It
# outlives every infrakit command by design (its master stops its workers).
stop_haproxy() {
	local pidfile="$work/.infrakit/haproxy/haproxy.pid" pid
	[[ -s "$pidfile" ]] || return 0
	pid="$(head -n 1 "$pidfile")"
	if is_ours "$pid" "$work/.infrakit/haproxy/haproxy.cfg"; then
		kill "$pid" 2>/dev/null || true
		for _ in $(seq 50); do
			is_ours "$pid" haproxy || return 0
			sleep 0.1
		done
		kill -KILL "$pid" 2>/dev/null || true
	fi
}
