package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/infrakit/infrakit/plugins/docker/dockertest"
	"github.com/infrakit/infrakit/plugins/haproxy/haproxytest"
)

// The docker tests run testdata/docker's stack (3 web containers checked by
// the healthcheck flavor, behind HAProxy, enrolled into an exports file) on
// the local Docker Engine with the real binaries, and break it with the
// docker CLI as a user would. Everything they make is unique to the test
// (stack name, image tag, network, HAProxy directory and port), so they run
// beside other packages' tests, and everything is removed when they end.

// dockerEnv is one docker test's stack directory and what it made around it.
type dockerEnv struct {
	t  *testing.T
	w  *workdir
	ha string // INFRAKIT_HAPROXY_DIR

	stack   string // the stack's name: every container carries infrakit.stack=stack
	image   string // the web image, tagged for this test
	network string // a bridge network of this test's own
	port    int    // HAProxy's port for the ingress route
}

// newDockerEnv skips the test when no Docker Engine answers; otherwise it
// builds the web image under a tag of its own, creates a network, and
// writes testdata/docker/stack.hcl into a workdir, rewritten to use them,
// a free loopback port for HAProxy, and a stack name unique to the test.
func newDockerEnv(t *testing.T) *dockerEnv {
	t.Helper()
	if out, err := dockerRun("version", "--format", "{{.Server.Version}}"); err != nil {
		t.Skipf("no Docker Engine answers (docker version: %v): %s", err, strings.TrimSpace(out))
	}
	if !haproxytest.Installed() {
		t.Fatal("haproxy is not installed (apt-get install haproxy; .ci/run installs it): the stack's load balancer runs it")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	d := &dockerEnv{t: t, stack: "e2e-docker-" + suffix, image: "infrakit-docker-web:e2e-" + suffix, network: "ik-e2e-" + suffix}

	// Cleanups run last first: the containers go (after the watch the test
	// starts stops), then HAProxy, the network and the image.
	start := time.Now()
	if out, err := dockerRunIn("..", "bash", "testdata/docker/build-image.sh", d.image); err != nil {
		t.Fatalf("build the web image: %v\n%s", err, out)
	}
	t.Logf("built %s in %s", d.image, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { d.cleanup("rmi", "-f", d.image) })
	d.docker("network", "create", "--label", "infrakit.e2e="+d.stack, d.network)
	t.Cleanup(func() { d.cleanup("network", "rm", d.network) })
	dir, err := os.MkdirTemp("", "ik-") // short: HAProxy's unix sockets live here
	if err != nil {
		t.Fatal(err)
	}
	d.ha = dir
	t.Cleanup(d.stopHAProxy)
	t.Cleanup(d.removeContainers)

	d.port = haproxytest.FreePort(t)
	d.w = newWorkdir(t)
	d.w.env = append(d.w.env,
		"INFRAKIT_HAPROXY_DIR="+d.ha,
		// The exports file is the workdir's; exportfs is not run.
		"INFRAKIT_NFS_EXPORTS_FILE="+filepath.Join(d.w.dir, "web.exports"),
		"INFRAKIT_NFS_EXPORTFS=none",
	)
	stack, err := dockertest.Stack(dockertest.StackOptions{Stack: d.stack, Image: d.image, Network: d.network, LBPort: d.port})
	if err != nil {
		t.Fatal(err)
	}
	d.w.writeFile("stack.hcl", stack)
	return d
}

// dockerRun runs the docker CLI (bounded in time) and returns its output.
func dockerRun(args ...string) (string, error) {
	return dockerRunIn("", "docker", args...)
}

func dockerRunIn(dir, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.WaitDelay = 5 * time.Second
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}

// docker runs the docker CLI and fails the test unless it succeeds.
func (d *dockerEnv) docker(args ...string) string {
	d.t.Helper()
	out, err := dockerRun(args...)
	if err != nil {
		d.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// cleanup runs the docker CLI at the end of the test, logging a failure.
func (d *dockerEnv) cleanup(args ...string) {
	if out, err := dockerRun(args...); err != nil {
		d.t.Logf("cleanup: docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// containers lists the IDs (short, as infrakit's instance IDs) of the
// stack's containers, sorted: running ones, or all with -a, with extra
// filters.
func (d *dockerEnv) containers(all bool, filters ...string) []string {
	d.t.Helper()
	args := []string{"ps", "-q", "--filter", "label=infrakit.stack=" + d.stack}
	if all {
		args = append(args, "-a")
	}
	for _, f := range filters {
		args = append(args, "--filter", f)
	}
	ids := strings.Fields(d.docker(args...))
	slices.Sort(ids)
	return ids
}

func (d *dockerEnv) running() []string { return d.containers(false, "status=running") }

// ip is a container's address on the test's network.
func (d *dockerEnv) ip(id string) string {
	d.t.Helper()
	return strings.TrimSpace(d.docker("inspect", "-f", fmt.Sprintf("{{(index .NetworkSettings.Networks %q).IPAddress}}", d.network), id))
}

// removeContainers force-removes whatever container of the stack is left.
func (d *dockerEnv) removeContainers() {
	out, err := dockerRun("ps", "-aq", "--filter", "label=infrakit.stack="+d.stack)
	if err != nil {
		d.t.Logf("cleanup: docker ps: %v\n%s", err, out)
		return
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		d.cleanup(append([]string{"rm", "-f"}, ids...)...)
	}
}

// stopHAProxy stops the HAProxy the haproxy provider started in the test's
// directory (it outlives the provider by design), if the pid file names a
// haproxy running on that directory's configuration, then removes the
// directory.
func (d *dockerEnv) stopHAProxy() {
	haproxytest.StopDir(d.t, d.ha)
	_ = os.RemoveAll(d.ha)
}

// followers reports whether the load balancer's backends and the exports
// file's authorizations are exactly ids, as `infrakit lb backends ls` and
// `infrakit enrollment describe` (which ask the providers) say.
func (d *dockerEnv) followers(ids []string) bool {
	d.t.Helper()
	if !slices.Equal(d.w.backends("web"), ids) {
		return false
	}
	var sources []string
	for _, a := range d.w.authorizations("exports").Authorizations {
		sources = append(sources, a.SourceID)
	}
	slices.Sort(sources)
	return slices.Equal(sources, ids)
}

// dockerTraffic sends requests through HAProxy one after another until
// stopped, on a new connection each, and counts what comes back.
type dockerTraffic struct {
	url    string
	client *http.Client
	stop   chan struct{}
	done   chan struct{}

	mu       sync.Mutex
	ok       int
	failed   int
	failures []string             // the first few, with when
	first    map[string]time.Time // instance ID → its first answer
	slowest  time.Duration
}

func startDockerTraffic(t *testing.T, port int) *dockerTraffic {
	tr := &http.Transport{DisableKeepAlives: true, Proxy: nil}
	g := &dockerTraffic{
		url: fmt.Sprintf("http://127.0.0.1:%d/", port),
		// Generous: a request HAProxy sends to a container that just died
		// waits for the connect to fail before it is redispatched.
		client: &http.Client{Transport: tr, Timeout: 30 * time.Second},
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
		first:  map[string]time.Time{},
	}
	go g.run()
	t.Cleanup(g.halt)
	return g
}

func (g *dockerTraffic) run() {
	defer close(g.done)
	defer g.client.CloseIdleConnections()
	for {
		select {
		case <-g.stop:
			return
		default:
		}
		start := time.Now()
		id, err := g.get()
		took := time.Since(start)
		g.mu.Lock()
		g.slowest = max(g.slowest, took)
		if err != nil {
			g.failed++
			if len(g.failures) < 10 {
				g.failures = append(g.failures, fmt.Sprintf("%s: %v", start.Format("15:04:05.000"), err))
			}
		} else {
			g.ok++
			if _, seen := g.first[id]; !seen {
				g.first[id] = time.Now()
			}
		}
		g.mu.Unlock()
		select {
		case <-g.stop:
			return
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// get sends one request; the answer names the instance that served it.
func (g *dockerTraffic) get() (string, error) {
	resp, err := g.client.Get(g.url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %q", resp.Status, body)
	}
	var id string
	if _, err := fmt.Sscanf(string(body), "instance %s port", &id); err != nil {
		return "", fmt.Errorf("unexpected answer %q", body)
	}
	return id, nil
}

// answered reports whether every one of ids has answered a request.
func (g *dockerTraffic) answered(ids ...string) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range ids {
		if _, ok := g.first[id]; !ok {
			return false
		}
	}
	return true
}

func (g *dockerTraffic) halt() {
	select {
	case <-g.stop:
	default:
		close(g.stop)
	}
	<-g.done
}

// counts stops the traffic and returns what it saw.
func (g *dockerTraffic) counts() (ok, failed int, failures []string, slowest time.Duration) {
	g.halt()
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.ok, g.failed, slices.Clone(g.failures), g.slowest
}

// dockerWithout returns ids less drop.
func dockerWithout(ids []string, drop ...string) []string {
	return slices.DeleteFunc(slices.Clone(ids), func(id string) bool { return slices.Contains(drop, id) })
}

// TestDockerHeals runs testdata/docker's stack with `infrakit watch` and
// requests flowing through HAProxy, and breaks it as a user would: a
// container killed with `docker kill` is replaced and HAProxy's backends
// (and the exports file's authorizations) follow; two removed with `docker
// rm -f` are replaced; one that fails its HTTP health check is replaced;
// `group scale web 6` makes 6 containers labelled with the group; and
// `destroy` leaves no container of the stack. Requests keep being answered
// throughout. Deadlines are generous (the machine is shared); durations are
// logged, not asserted.
func TestDockerHeals(t *testing.T) {
	t.Parallel()
	d := newDockerEnv(t)
	w := d.w
	w.init()
	start := time.Now()
	w.ok("apply", "-auto-approve")
	ids := d.running()
	t.Logf("apply: %d containers in %s", len(ids), time.Since(start).Round(time.Millisecond))
	if len(ids) != 3 {
		t.Fatalf("after apply %d containers of the stack run (%q), want 3\n%s", len(ids), ids, d.docker("ps", "-a"))
	}
	if got := d.containers(false, "label=infrakit.group=web"); !slices.Equal(got, ids) {
		t.Fatalf("containers labelled infrakit.group=web: %q, want %q", got, ids)
	}
	if !d.followers(ids) {
		t.Fatalf("after apply, backends %q and authorizations %+v are not the containers %q",
			w.backends("web"), w.authorizations("exports"), ids)
	}
	traffic := startDockerTraffic(t, d.port)
	within(t, time.Minute, "every container answering through HAProxy", func() bool { return traffic.answered(ids...) })

	p := w.startWatch(nil)
	within(t, time.Minute, "watch's first pass", func() bool { return p.status().Passes > 0 })

	// heal waits until the stack runs want containers, none of gone, the
	// load balancer and the exports follow, and every new container
	// answers through HAProxy; it logs how long each took.
	heal := func(what string, want int, gone []string) []string {
		t.Helper()
		start := time.Now()
		var now []string
		within(t, 3*time.Minute, fmt.Sprintf("%s: %d containers, none of %q", what, want, gone), func() bool {
			now = d.running()
			return len(now) == want && len(dockerWithout(now, gone...)) == want
		})
		replaced := time.Since(start)
		within(t, 3*time.Minute, what+": backends and authorizations following the containers", func() bool {
			now = d.running()
			return d.followers(now)
		})
		followed := time.Since(start)
		within(t, 3*time.Minute, what+": every container answering through HAProxy", func() bool { return traffic.answered(now...) })
		t.Logf("%s: %d containers after %s, followed by HAProxy and the exports after %s, all answering after %s",
			what, want, replaced.Round(time.Millisecond), followed.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
		return now
	}

	// docker kill: Docker's event stream tells watch at once.
	victim := ids[0]
	d.docker("kill", victim)
	ids = heal("docker kill "+victim, 3, []string{victim})

	// docker rm -f of two.
	victims := ids[:2]
	d.docker(append([]string{"rm", "-f"}, victims...)...)
	ids = heal("docker rm -f of two", 3, victims)

	// A container failing its HTTP health check: POST /fail makes its
	// /health answer 500 (the testdata/docker webserver); past the
	// healthcheck flavor's threshold and the group's 5s grace, watch
	// replaces it.
	sick := ids[0]
	direct := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	resp, err := direct.Post("http://"+net.JoinHostPort(d.ip(sick), "8080")+"/fail", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	ids = heal("unhealthy "+sick, 3, []string{sick})
	if kinds := strings.Join(p.eventKinds(), " "); !strings.Contains(kinds, "replaced/unhealthy") || !strings.Contains(kinds, "replaced/vanished") {
		t.Errorf("watch's events lack the replacements: %s", kinds)
	}

	// Scale to 6: six containers labelled with the group.
	start = time.Now()
	w.ok("group", "scale", "web", "6")
	t.Logf("group scale web 6: returned after %s", time.Since(start).Round(time.Millisecond))
	ids = heal("group scale web 6", 6, nil)
	if got := d.containers(false, "label=infrakit.group=web"); len(got) != 6 {
		t.Fatalf("%d containers labelled infrakit.group=web, want 6: %q", len(got), got)
	}

	ok, failed, failures, slowest := traffic.counts()
	t.Logf("requests through HAProxy: %d answered, %d failed, slowest %s", ok, failed, slowest.Round(time.Millisecond))
	if failed > 0 {
		t.Errorf("%d of %d requests through HAProxy failed; the first: %s", failed, ok+failed, strings.Join(failures, "; "))
	}

	// Stop watch, then destroy: no container of the stack is left.
	if code, took := p.terminate(); code != 0 {
		t.Fatalf("watch exited %d after SIGTERM (%s)\n%s", code, took, p.stderr)
	}
	start = time.Now()
	w.ok("destroy", "-auto-approve")
	t.Logf("destroy: %s", time.Since(start).Round(time.Millisecond))
	if left := d.containers(true); len(left) > 0 {
		t.Fatalf("after destroy %d containers of the stack are left: %q\n%s", len(left), left, d.docker("ps", "-a"))
	}
}
