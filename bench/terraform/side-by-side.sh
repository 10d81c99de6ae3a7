#!/usr/bin/env bash
# Side by side: the same applies of N resources with Terraform (or OpenTofu)
# and with infrakit, on this machine, one after the other, and the ratio.
#
#   make bench-terraform                  # N=1000
#   make bench-terraform N="1000 10000"   # both (10,000 with Terraform takes ~half an hour)
#   bench/terraform/side-by-side.sh       # the same, after make build; N from the environment
#
# Terraform creates N `terraform_data` resources: built into Terraform
# (terraform.io/builtin/terraform), so nothing is downloaded, `terraform
# init` works offline, and no provider RPC is involved. infrakit creates N
# simulator instances in three groups (zero delay, the vanilla flavor),
# from bin/ (make build). Both start from an initialized, empty directory;
# the apply alone is timed. Set TERRAFORM=path to choose the binary;
# otherwise terraform, then tofu, is looked up on PATH, and without either
# the script says so and exits 0.
set -euo pipefail

cd "$(dirname "$0")/../.."
root=$PWD
bin=$root/bin
N=${N:-1000}

tf=${TERRAFORM:-}
if [[ -z $tf ]]; then
	tf=$(command -v terraform || command -v tofu || true)
fi
if [[ -z $tf ]]; then
	echo "side-by-side: skipped: neither terraform nor tofu is on PATH (set TERRAFORM=path to name one)"
	exit 0
fi
for b in infrakit infrakit-provider-simulator infrakit-provider-vanilla; do
	if [[ ! -x $bin/$b ]]; then
		echo "side-by-side: $bin/$b is missing: run make build first" >&2
		exit 1
	fi
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# No update checks, no user CLI configuration: an offline, repeatable run.
export CHECKPOINT_DISABLE=1 TF_IN_AUTOMATION=1 TF_INPUT=0
: >"$work/terraformrc"
export TF_CLI_CONFIG_FILE=$work/terraformrc
# infrakit's knobs (simulator delays, failures) stay out of it.
while IFS='=' read -r name _; do
	[[ $name == INFRAKIT_* ]] && unset "$name"
done < <(env)

# seconds CMD... runs CMD quietly and prints its wall time in seconds.
seconds() {
	local start end
	start=$(date +%s.%N)
	if ! "$@" >"$work/last.log" 2>&1; then
		echo "side-by-side: $* failed:" >&2
		tail -20 "$work/last.log" >&2
		exit 1
	fi
	end=$(date +%s.%N)
	echo "$end - $start" | bc
}

terraform_stack() { # n
	cat <<EOF
resource "terraform_data" "instance" {
  count = $1
  input = { note = "bench", index = count.index }
}
EOF
}

infrakit_stack() { # n: three groups whose sizes sum to n
	local n=$1 sizes i
	sizes=($((n / 3)) $((n / 3)) $((n - 2 * (n / 3))))
	printf 'stack "bench" {}\n\nprovider "simulator" {}\nprovider "vanilla" {}\n'
	for i in 0 1 2; do
		cat <<EOF

group "g$i" {
  size = ${sizes[$i]}
  instance {
    provider   = simulator
    type       = "compute"
    properties = { note = "bench" }
  }
  flavor {
    provider   = vanilla
    properties = { init = ["echo bench"], tags = { tier = "g$i" } }
  }
}
EOF
	done
}

echo "side-by-side: $("$tf" version | head -1) against infrakit ($bin), N = $N; load average $(cut -d' ' -f1-3 /proc/loadavg)"
printf '%-8s  %-12s  %-12s  %s\n' "N" "$(basename "$tf")" "infrakit" "ratio"
for n in $N; do
	tdir=$work/tf-$n idir=$work/ik-$n
	mkdir -p "$tdir" "$idir"
	terraform_stack "$n" >"$tdir/main.tf"
	(cd "$tdir" && seconds "$tf" init -input=false -no-color >/dev/null)
	t=$(cd "$tdir" && seconds "$tf" apply -auto-approve -input=false -no-color)

	infrakit_stack "$n" >"$idir/main.hcl"
	(cd "$idir" && seconds "$bin/infrakit" init -plugin-dir "$bin" >/dev/null)
	i=$(cd "$idir" && seconds "$bin/infrakit" apply -auto-approve)
	got=$(find "$idir/.infrakit/simulator/instances/compute" -name '*.json' ! -name '.*' | wc -l)
	if [[ $got -ne $n ]]; then
		echo "side-by-side: infrakit applied $got instances, want $n" >&2
		exit 1
	fi
	printf '%-8s  %-12s  %-12s  %s\n' "$n" "$(printf '%.2f s' "$t")" "$(printf '%.2f s' "$i")" "$(echo "scale=1; $t / $i" | bc)x"
	rm -rf "$tdir" "$idir"
done
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
