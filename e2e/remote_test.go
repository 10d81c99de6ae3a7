package e2e

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// remoteStack is added to the e2e stack for the remote CLI's tests: a
// group whose size is a variable (so that -var, -var-file and
// INFRAKIT_VAR_* reach the plan) and outputs, one sensitive.
const remoteStack = `
variable "extra_size" {
  type    = number
  default = 1
}

group "extra" {
  size = var.extra_size
  instance {
    provider = simulator
    type     = "compute"
  }
  flavor { provider = vanilla }
}

output "miners" {
  value = length(group.miners.members)
}

output "extra_ids" {
  value = sort(group.extra.members[*].id)
}

output "secret" {
  value     = "s3cret"
  sensitive = true
}
`

// writeRemoteStack writes the stack files of the remote CLI's tests into
// w, and nothing else.
func (w *workdir) writeRemoteStack() {
	w.t.Helper()
	w.copyStack("testdata/e2e")
	w.drainAt("stack.hcl", "0s")
	w.writeFile("remote.hcl", remoteStack)
}

// newRemoteStack is a work directory with the remote stack applied.
func newRemoteStack(t *testing.T) *workdir {
	t.Helper()
	w := newWorkdir(t)
	w.writeRemoteStack()
	w.init()
	w.ok("apply", "-auto-approve")
	return w
}

// newClientDir is where the remote CLI runs: a directory holding only the
// stack files (no state, no providers, no .infrakit), with token as
// INFRAKIT_TOKEN ("" for none).
func newClientDir(t *testing.T, token string) *workdir {
	t.Helper()
	c := newWorkdir(t)
	c.writeRemoteStack()
	if token != "" {
		c.env = append(c.env, "INFRAKIT_TOKEN="+token)
	}
	return c
}

// remote runs infrakit -address=URL args in the client directory.
func (w *workdir) remote(url string, args ...string) result {
	w.t.Helper()
	return w.run(append([]string{"-address=" + url}, args...)...)
}

// withEnv is w running with more environment.
func (w *workdir) withEnv(env ...string) *workdir {
	c := *w
	c.env = append(slices.Clone(w.env), env...)
	return &c
}

// sameRun fails the test unless the two runs exited alike and printed the
// same, after norm (nil: byte for byte).
func sameRun(t *testing.T, local, remote result, norm func(string) string) {
	t.Helper()
	if norm == nil {
		norm = func(s string) string { return s }
	}
	// Waiting for the lock a watch pass holds is timing, not output: either
	// run may meet it.
	plain := norm
	norm = func(s string) string { return plain(lockWaitLine.ReplaceAllString(s, "")) }
	if local.code != remote.code || norm(local.stdout) != norm(remote.stdout) || norm(local.stderr) != norm(remote.stderr) {
		t.Errorf("the remote run differs from the local one\nlocal:  %s\nremote: %s", local, remote)
	}
}

// The simulator's instance IDs (prefix-8 hex digits), the state's
// lineage (each world has its own), the lock waits a
// watch pass may cause, and the lines of progress, whose order follows
// which call finished first.
var (
	simulatorID  = regexp.MustCompile(`\b(compute|disk)-[0-9a-f]{8}\b`)
	lineage      = regexp.MustCompile(`\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b`)
	lockWaitLine = regexp.MustCompile(`(?m)^Waiting for the state lock .*\n`)
	progressLine = regexp.MustCompile(`^\S+: .*\[\d+/\d+\]$`)
)

// normalised is s with instance IDs and the lineage replaced, lock waits left out and the
// progress lines sorted, after the others: what two runs of the same
// commands on two worlds print alike.
func normalised(s string) string {
	s = lockWaitLine.ReplaceAllString(simulatorID.ReplaceAllString(s, "$1-ID"), "")
	s = lineage.ReplaceAllString(s, "LINEAGE")
	var lines, progress []string
	for _, l := range strings.Split(s, "\n") {
		if progressLine.MatchString(l) {
			progress = append(progress, l)
		} else {
			lines = append(lines, l)
		}
	}
	slices.Sort(progress)
	return strings.Join(lines, "\n") + "\n-- progress --\n" + strings.Join(progress, "\n")
}

// TestRemoteReadsEqualLocal: every read run against a watch from a
// directory holding only the stack files prints byte for byte what it
// prints run in the watch's directory, errors too; plan sees the client's
// files, variables and environment, and plan -out writes the plan on the
// client.
func TestRemoteReadsEqualLocal(t *testing.T) {
	t.Parallel()
	w := newRemoteStack(t)
	p := w.startWatch(nil)
	c := newClientDir(t, p.token)
	url := "http://" + p.addr

	// A variable file beside both directories, named the same from each.
	if filepath.Dir(w.dir) != filepath.Dir(c.dir) {
		t.Fatalf("the two directories are not siblings: %s %s", w.dir, c.dir)
	}
	if err := os.WriteFile(filepath.Join(filepath.Dir(w.dir), "sizes.ivars"), []byte("extra_size = 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	env := "INFRAKIT_VAR_extra_size=2"
	for _, args := range [][]string{
		{"group", "ls"},
		{"group", "ls", "-json"},
		{"group", "ls", "miners"},
		{"group", "describe", "miners"},
		{"group", "describe", "miners", "-json"},
		{"group", "scale", "miners"},
		{"lb", "routes", "ls", "lb1"},
		{"lb", "routes", "ls", "lb1", "-json"},
		{"lb", "backends", "ls", "lb3"},
		{"lb", "backends", "ls", "lb3", "-json"},
		{"enrollment", "describe", "nfs"},
		{"enrollment", "describe", "nfs", "-json"},
		{"ingress", "describe", "test.com"},
		{"show"},
		{"show", "-json"},
		{"output"},
		{"output", "-json"},
		{"output", "miners"},
		{"plan"},
		{"plan", "-json"},
		{"plan", "-var-file", "../sizes.ivars"},
		{"plan", "-detailed-exitcode", "-var", "extra_size=4", "-no-color"},
		// Errors are printed alike too.
		{"group", "describe", "nope"},
		{"plan", "-var", "nope=1"},
		{"group", "ls", "-bogus"},
	} {
		sameRun(t, w.run(args...), c.remote(url, args...), nil)
	}
	// The client's environment, not the watch's.
	local := w.withEnv(env).ok("plan")
	if !strings.Contains(local.stdout, "1 -> 2") {
		t.Errorf("INFRAKIT_VAR_extra_size=2 does not plan extra 1 -> 2: %s", local)
	}
	sameRun(t, local, c.withEnv(env).remote(url, "plan"), nil)

	// plan -out: the plan is written in the client's directory, 0600.
	local = w.withEnv(env).ok("plan", "-out", "saved.plan")
	sameRun(t, local, c.withEnv(env).remote(url, "plan", "-out", "saved.plan"), nil)
	fi, err := os.Stat(filepath.Join(c.dir, "saved.plan"))
	if err != nil || fi.Mode().Perm() != 0o600 || fi.Size() == 0 {
		t.Fatalf("the remote plan -out wrote no plan in the client's directory: %v %v", fi, err)
	}
	// The client's directory got nothing else: no state, no providers.
	entries, _ := os.ReadDir(c.dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "remote.hcl saved.plan stack.hcl" {
		t.Errorf("the client's directory holds %q", names)
	}
}

// TestRemoteWritesEqualLocal runs the same writes on two worlds made alike,
// each with its own watch: on one in its directory, on the other through
// the remote CLI from a directory of stack files. They print the same,
// but for instance IDs, and leave the same sizes.
func TestRemoteWritesEqualLocal(t *testing.T) {
	t.Parallel()
	a := newRemoteStack(t)
	a.startWatch(nil)
	b := newRemoteStack(t)
	pb := b.startWatch(nil)
	c := newClientDir(t, pb.token)
	url := "http://" + pb.addr

	// both runs args on both worlds, checks that they print alike and
	// returns the local run, which should print want (on stdout or
	// stderr).
	both := func(want string, args ...string) result {
		t.Helper()
		local := a.run(args...)
		sameRun(t, local, c.remote(url, args...), normalised)
		if !strings.Contains(local.stdout+local.stderr, want) {
			t.Errorf("want %q from %s", want, local)
		}
		return local
	}
	both(`Group "cattle" scaled to 12: 2 created, 0 destroyed`, "group", "scale", "cattle", "12")
	both("12\n", "group", "scale", "cattle")
	// destroy-instances names instances of each world.
	ids := func(w *workdir) []string { return w.groups()["cattle"].ids() }
	local := a.run("group", "destroy-instances", "cattle", ids(a)[0], ids(a)[1])
	sameRun(t, local, c.remote(url, "group", "destroy-instances", "cattle", ids(b)[0], ids(b)[1]), normalised)
	if !strings.Contains(local.stdout, `Destroyed 2 of the 2 instances named in group "cattle"`) {
		t.Errorf("destroy-instances: %s", local)
	}
	both("", "group", "stop-update", "miners")
	// apply shows the plan and asks; stdin is no terminal, so it is
	// refused as a local apply refuses, and the watch lets go of the lock
	// at once (held, it would fail the next command after -lock-timeout).
	both("cannot ask for approval: stdin is not a terminal; run with -auto-approve to apply without asking", "apply", "-var", "extra_size=2")
	both("Destroy cancelled", "group", "destroy", "extra")
	both("Apply complete!", "apply", "-auto-approve", "-var", "extra_size=2")
	both("Saved the plan to: saved.plan", "plan", "-out", "saved.plan", "-var", "extra_size=3")
	both("Apply complete!", "apply", "saved.plan")
	// A saved plan is applied once: the state moved since.
	both("Saved plan is stale", "apply", "saved.plan")
	both("", "group", "free", "miners")
	both("", "enrollment", "free", "nfs")
	both(`"changes": true`, "apply", "-auto-approve", "-json", "-var", "extra_size=3")
	both("", "group", "destroy", "extra", "-auto-approve")
	both("", "ingress", "destroy", "test.com", "-auto-approve")
	both("GROUP", "show")

	for _, g := range []string{"miners", "cattle", "extra"} {
		la, lb := a.run("group", "scale", g), b.run("group", "scale", g)
		if la.code != lb.code || la.stdout != lb.stdout {
			t.Errorf("group %s: here %s, remote %s", g, la, lb)
		}
	}
	if na, nb := len(a.simulatorInstances("compute")), len(b.simulatorInstances("compute")); na != nb {
		t.Errorf("the simulators hold %d and %d instances", na, nb)
	}
}

// TestRemoteAuth: without the token, or with another, the watch refuses
// (401) and nothing changes; with -public-read a read needs no token but a
// write still does; the commands that run where the state is refuse
// -address; a watch refuses to listen beyond loopback without TLS.
func TestRemoteAuth(t *testing.T) {
	t.Parallel()
	w := newRemoteStack(t)
	p := w.startWatch(nil)
	url := "http://" + p.addr

	for _, tt := range []struct{ token, says string }{
		{"", "wants a token"},
		{"not-the-token-not-the-token", "refused the token"},
	} {
		c := newClientDir(t, tt.token)
		for _, args := range [][]string{{"group", "scale", "cattle", "12"}, {"group", "ls"}, {"apply", "-auto-approve"}} {
			res := c.remote(url, args...)
			if res.code != 1 || res.stdout != "" || !strings.Contains(res.stderr, "(401 Unauthorized)") ||
				!strings.Contains(res.stderr, "the watch at "+url+" "+tt.says+": set INFRAKIT_TOKEN") {
				t.Errorf("token %q: %s", tt.token, res)
			}
		}
	}
	if size := strings.TrimSpace(w.ok("group", "scale", "cattle").stdout); size != "10" {
		t.Fatalf("after refused remote scales the size is %s, want 10", size)
	}

	c := newClientDir(t, p.token)
	res := c.remote(url, "init")
	if res.code != 1 || !strings.Contains(res.stderr, "infrakit init runs where the state is; it cannot run against a remote watch (-address)") {
		t.Errorf("init with -address: %s", res)
	}
	// With the address only in the environment, the commands that run
	// where the state is run here, and the others go to the watch.
	if res := c.withEnv("INFRAKIT_ADDR=" + url).run("version"); res.code != 0 || !strings.HasPrefix(res.stdout, "infrakit v") {
		t.Errorf("version with INFRAKIT_ADDR: %s", res)
	}
	if res := c.withEnv("INFRAKIT_ADDR="+url).run("group", "scale", "cattle"); res.code != 0 || res.stdout != "10\n" {
		t.Errorf("group scale with INFRAKIT_ADDR: %s", res)
	}

	// -public-read: reads pass without a token; writes do not.
	if code, _ := p.terminate(); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
	p = w.startWatch(nil, "-public-read")
	url = "http://" + p.addr
	anon := newClientDir(t, "")
	for _, args := range [][]string{{"group", "ls"}, {"show", "-json"}, {"lb", "backends", "ls", "lb3"}} {
		sameRun(t, w.run(args...), anon.remote(url, args...), nil)
	}
	res = anon.remote(url, "group", "scale", "cattle", "12")
	if res.code != 1 || !strings.Contains(res.stderr, "(401 Unauthorized)") {
		t.Errorf("a write without the token on a -public-read watch: %s", res)
	}
	if size := strings.TrimSpace(w.ok("group", "scale", "cattle").stdout); size != "10" {
		t.Fatalf("after a refused remote scale the size is %s, want 10", size)
	}

	// Beyond loopback without TLS the token would cross the network in clear.
	if code, _ := p.terminate(); code != 0 {
		t.Fatalf("watch exited %d", code)
	}
	res = w.run("watch", "-listen", "0.0.0.0:0")
	if res.code == 0 || !strings.Contains(res.stderr, "-listen 0.0.0.0:0 is not a loopback address") || !strings.Contains(res.stderr, "-tls-cert") {
		t.Errorf("watch -listen 0.0.0.0:0 without TLS: %s", res)
	}
}

// TestRemoteTLS: a watch serving HTTPS with a certificate of a self-signed
// CA is reached with INFRAKIT_CACERT naming the CA, and refused as not
// trusted without it.
func TestRemoteTLS(t *testing.T) {
	t.Parallel()
	w := newRemoteStack(t)
	ca := newTestCA(t, t.TempDir())
	p := w.startWatch(nil, "-tls-cert", ca.CertFile, "-tls-key", ca.KeyFile)
	url := "https://" + p.addr
	c := newClientDir(t, p.token)

	sameRun(t, w.run("group", "ls"), c.withEnv("INFRAKIT_CACERT="+ca.CAFile).remote(url, "group", "ls"), nil)
	sameRun(t, w.run("group", "scale", "cattle", "11"), c.withEnv("INFRAKIT_CACERT="+ca.CAFile).remote(url, "group", "scale", "cattle", "12"),
		func(s string) string { return strings.NewReplacer("11", "N", "12", "N").Replace(normalised(s)) })

	res := c.remote(url, "group", "ls")
	if res.code != 1 || res.stdout != "" || !strings.Contains(res.stderr, "Error: The watch's certificate is not trusted") ||
		!strings.Contains(res.stderr, "certificate signed by unknown authority") || !strings.Contains(res.stderr, "INFRAKIT_CACERT") {
		t.Errorf("without INFRAKIT_CACERT: %s", res)
	}
	// http:// to an https watch is not the remote CLI's answer.
	if res := c.remote("http://"+p.addr, "group", "ls"); res.code != 1 || res.stdout != "" {
		t.Errorf("http to https: %s", res)
	}
	if size := strings.TrimSpace(w.ok("group", "scale", "cattle").stdout); size != "12" {
		t.Errorf("after the remote scale over TLS the size is %s, want 12", size)
	}
}

// A watch that requires client certificates (-tls-client-ca) answers a
// remote CLI presenting one the CA signed (INFRAKIT_CLIENT_CERT and
// INFRAKIT_CLIENT_KEY), as the local CLI answers, and refuses one that
// presents none.
func TestRemoteClientCertificate(t *testing.T) {
	t.Parallel()
	w := newRemoteStack(t)
	ca := newTestCA(t, t.TempDir())
	p := w.startWatch(nil, "-tls-cert", ca.CertFile, "-tls-key", ca.KeyFile, "-tls-client-ca", ca.CAFile)
	url := "https://" + p.addr
	c := newClientDir(t, p.token).withEnv("INFRAKIT_CACERT=" + ca.CAFile)
	sameRun(t, w.run("group", "ls"),
		c.withEnv("INFRAKIT_CLIENT_CERT="+ca.ClientCertFile, "INFRAKIT_CLIENT_KEY="+ca.ClientKeyFile).remote(url, "group", "ls"), nil)
	if res := c.remote(url, "group", "ls"); res.code != 1 || res.stdout != "" {
		t.Errorf("without a client certificate: %s", res)
	}
}
