package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The multi-host HA test of issue 8: etcd and three `infrakit watch`
// managers each in a container of their own, built FROM scratch around our
// static binaries (no registry), on a private Docker network, so that one
// manager can be cut off for real with `docker network disconnect`.
//
//	cluster network: etcd (alias "etcd") and the three managers
//	admin network:   the three managers only; the test reads their
//	                 /v1/status through it, so a manager cut off from the
//	                 cluster network still answers the test
//
// The managers share one simulator store (a host directory bind-mounted at
// /sim in each), the "cloud" they all could act on; each has a working
// directory of its own (a host directory at /stack, where `infrakit init`
// ran in a container of its own before `watch` started). Containers run as
// the test's user, so every file they leave on the host is the test's to
// remove.

const (
	// haLeaseTTL is the stack's lease_ttl (testdata/ha/stack/main.hcl).
	haLeaseTTL = 2 * time.Second
	// haDesired is the size of the stack's one group.
	haDesired = 3
	// haManagers is how many watch managers run.
	haManagers = 3
	// haStatusPort is where each manager serves /v1/status.
	haStatusPort = 24864
	// haWait bounds each wait for the cluster to reach a state. Generous:
	// the machine is shared and a failure says what it saw.
	haWait = 90 * time.Second
	// haLabel marks every container, network and image the test makes;
	// its value is the run's id, so cleanup removes exactly this run's.
	haLabel = "infrakit.e2e.hadocker"
)

// TestHADocker cuts the leading manager off the network, and shows that it
// stops acting before its lease runs out (it reports leader:false before
// another manager is seen to lead), that another manager takes over and
// heals an instance removed meanwhile, that on reconnect the old leader
// follows the new one without flapping for several TTLs, and that the
// shared simulator never holds more instances than desired. The figures
// (step-down, failover and heal times) are logged; none is asserted.
func TestHADocker(t *testing.T) {
	haSkipWithoutDocker(t)
	c := newHACluster(t)
	c.buildImages()
	c.createNetworks()
	c.startEtcd()
	c.initManagers()
	c.apply()
	if got := c.instances(); len(got) != haDesired {
		t.Fatalf("after apply the simulator holds %d instances, want %d: %v", len(got), haDesired, got)
	}
	watchCount := c.startSampler()
	defer func() { _, _, _ = watchCount.stop() }()
	c.startManagers()

	// Exactly one leader, known to every manager.
	first := c.waitRounds("one leader that every manager names", nil, func(r haRound) bool {
		l := r.leaders()
		if len(l) != 1 {
			return false
		}
		for _, s := range r {
			if s.err != nil || s.LeaderIdentity != l[0].Identity {
				return false
			}
		}
		return true
	})
	old := first.leaders()[0]
	idents := map[string]bool{}
	for _, s := range first {
		idents[s.Identity] = true
	}
	if len(idents) != haManagers {
		t.Fatalf("the managers' identities are not distinct: %s", first)
	}
	t.Logf("leader: %s (container %s); round: %s", old.Identity, old.m.name, first)

	// Cut the leader off: no etcd, no other manager. The test still sees
	// its status through the admin network.
	cut := time.Now()
	c.docker("network", "disconnect", c.clusterNet, old.m.name)
	var stepDown, newLeader time.Duration // since the cut, as first observed
	var stepRound, leadRound int
	var next haStatus
	rounds := 0
	c.waitRounds("the cut-off leader to step down and another manager to lead", nil, func(r haRound) bool {
		rounds++
		for _, s := range r {
			switch {
			case s.m == old.m && s.err == nil && !s.Leader && stepDown == 0:
				stepDown, stepRound = time.Since(cut), rounds
			case s.m != old.m && s.Leader && newLeader == 0:
				newLeader, leadRound, next = time.Since(cut), rounds, s
			}
		}
		return stepDown != 0 && newLeader != 0
	})
	if stepRound > leadRound {
		t.Errorf("the cut-off leader %s still reported leader:true after %s was seen leading (step-down seen in round %d, new leader in round %d): both acted at once",
			old.Identity, next.Identity, stepRound, leadRound)
	}
	t.Logf("cut off %s: it reported leader:false after %s (lease TTL %s); %s led after %s",
		old.Identity, haMS(stepDown), haLeaseTTL, next.Identity, haMS(newLeader))

	// An instance vanishes while the old leader is still cut off: only the
	// new leader may replace it. The old one still sees the shared store,
	// so had it gone on acting the store would hold one too many.
	before := c.instances()
	if len(before) != haDesired {
		t.Fatalf("before the removal the simulator holds %v, want %d instances", before, haDesired)
	}
	gone := before[0]
	if err := os.Remove(filepath.Join(c.instanceDir(), gone+".json")); err != nil {
		t.Fatal(err)
	}
	removed := time.Now()
	c.waitRounds("the new leader to replace the removed instance", func(r haRound) {
		for _, s := range r {
			if s.m == old.m && s.Leader {
				t.Errorf("the cut-off manager %s claims to lead again: %s", old.Identity, r)
			}
		}
	}, func(haRound) bool {
		now := c.instances()
		return len(now) == haDesired && !slices.Contains(now, gone)
	})
	t.Logf("instance %s removed while %s was cut off: replaced after %s", gone, old.Identity, haMS(time.Since(removed)))

	// Reconnect: the old leader must follow the new one, and leadership
	// must stay put: for several TTLs only the new leader leads.
	c.docker("network", "connect", c.clusterNet, old.m.name)
	reconnected := time.Now()
	stable := func(r haRound) {
		for _, s := range r {
			if s.Leader && s.Identity != next.Identity {
				t.Errorf("after the reconnect %s leads instead of %s: %s", s.Identity, next.Identity, r)
			}
			if s.m == next.m && s.err == nil && !s.Leader {
				t.Errorf("after the reconnect the new leader %s stopped leading: %s", next.Identity, r)
			}
		}
	}
	c.waitRounds("the old leader to follow the new one", stable, func(r haRound) bool {
		for _, s := range r {
			if s.m == old.m {
				return s.err == nil && !s.Leader && s.LeaderIdentity == next.Identity
			}
		}
		return false
	})
	t.Logf("reconnected %s: it named %s as leader after %s", old.Identity, next.Identity, haMS(time.Since(reconnected)))
	// What the old leader said of its leadership, for the record.
	logs, _ := exec.Command("docker", "logs", old.m.name).CombinedOutput()
	var said []string
	for _, line := range strings.Split(string(logs), "\n") {
		if strings.Contains(strings.ToLower(line), "leader") {
			said = append(said, line)
		}
	}
	t.Logf("the old leader's log on leadership:\n%s", strings.Join(said, "\n"))

	hold := 5 * haLeaseTTL
	end := time.Now().Add(hold)
	c.waitRounds(fmt.Sprintf("%s of stable leadership", hold), stable, func(haRound) bool { return time.Now().After(end) })
	if t.Failed() {
		return
	}

	peak, samples, err := watchCount.stop()
	if err != nil {
		t.Fatalf("sampling the simulator's store: %v", err)
	}
	final := c.instances()
	t.Logf("simulator instances: at most %d over %d samples; at the end %d", peak, samples, len(final))
	if peak > haDesired {
		t.Errorf("the simulator held %d instances at one point, more than the %d desired: two managers acted at once", peak, haDesired)
	}
	if len(final) != haDesired {
		t.Errorf("at the end the simulator holds %d instances, want %d: %v", len(final), haDesired, final)
	}
}

// haSkipWithoutDocker skips the test when no Docker Engine answers, and
// only then.
func haSkipWithoutDocker(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := haDockerCmd(ctx, "version", "--format", "{{.Server.Version}}"); err != nil {
		t.Skipf("no Docker Engine answers (is /var/run/docker.sock there, or DOCKER_HOST set?): %v", err)
	}
}

// haDockerCmd runs the docker CLI and returns its trimmed stdout; the error
// carries its stderr.
func haDockerCmd(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	// The classic builder needs no buildx and makes the same images from
	// these Dockerfiles.
	cmd.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	return strings.TrimSpace(stdout.String()), nil
}

// haCluster is one run's containers, networks and images.
type haCluster struct {
	t  *testing.T
	id string // unique per run: in every name, and haLabel's value
	// label is haLabel=id, as docker's --label and --filter take it.
	label string

	clusterNet, adminNet string
	etcdImage, mgrImage  string
	etcdName             string
	simDir               string // host side of /sim
	stack                string // the main.hcl each manager's /stack holds
	user                 string // uid:gid the containers run as
	managers             []*haManager
	client               *http.Client
}

// haManager is one manager container.
type haManager struct {
	name    string // container name
	host    string // its hostname
	workdir string // host side of its /stack
	status  string // http://IP:port/v1/status on the admin network
}

func newHACluster(t *testing.T) *haCluster {
	t.Helper()
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	id := "ikha-" + hex.EncodeToString(b[:])
	c := &haCluster{
		t:          t,
		id:         id,
		label:      haLabel + "=" + id,
		clusterNet: id + "-cluster",
		adminNet:   id + "-admin",
		etcdImage:  "infrakit-e2e-ha-etcd:" + id,
		mgrImage:   "infrakit-e2e-ha-manager:" + id,
		etcdName:   id + "-etcd",
		simDir:     t.TempDir(),
		stack:      filepath.Join("..", "testdata", "ha", "stack", "main.hcl"),
		user:       fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()),
		// No keep-alive: no idle connection outlives the test (goleak).
		client: &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}},
	}
	// Registered before anything exists, so a failure at any step still
	// removes whatever was made.
	t.Cleanup(c.cleanup)
	return c
}

// docker runs the docker CLI and fails the test if it fails.
func (c *haCluster) docker(args ...string) string {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	out, err := haDockerCmd(ctx, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// cleanup shows the containers' logs if the test failed, then removes
// every container, network and image carrying this run's label.
func (c *haCluster) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	filter := "label=" + c.label
	containers, err := haDockerCmd(ctx, "ps", "-aq", "--filter", filter)
	if err != nil {
		c.t.Errorf("cleanup: %v", err)
	}
	if c.t.Failed() {
		for _, name := range append([]string{c.etcdName}, c.managerNames()...) {
			// docker logs writes the container's stderr to its own.
			logs, _ := exec.CommandContext(ctx, "docker", "logs", "--tail", "150", name).CombinedOutput()
			c.t.Logf("--- docker logs %s:\n%s", name, logs)
		}
	}
	if ids := strings.Fields(containers); len(ids) > 0 {
		if _, err := haDockerCmd(ctx, append([]string{"rm", "-f", "-v"}, ids...)...); err != nil {
			c.t.Errorf("cleanup: %v", err)
		}
	}
	nets, err := haDockerCmd(ctx, "network", "ls", "-q", "--filter", filter)
	if err != nil {
		c.t.Errorf("cleanup: %v", err)
	}
	if ids := strings.Fields(nets); len(ids) > 0 {
		if _, err := haDockerCmd(ctx, append([]string{"network", "rm"}, ids...)...); err != nil {
			c.t.Errorf("cleanup: %v", err)
		}
	}
	images, err := haDockerCmd(ctx, "images", "-q", "--filter", filter)
	if err != nil {
		c.t.Errorf("cleanup: %v", err)
	}
	if ids := strings.Fields(images); len(ids) > 0 {
		if _, err := haDockerCmd(ctx, append([]string{"rmi", "-f"}, slices.Compact(slices.Sorted(slices.Values(ids)))...)...); err != nil {
			c.t.Errorf("cleanup: %v", err)
		}
	}
}

func (c *haCluster) managerNames() []string {
	var out []string
	for i := 1; i <= haManagers; i++ {
		out = append(out, fmt.Sprintf("%s-m%d", c.id, i))
	}
	return out
}

// buildImages builds the static binaries and the two images FROM scratch.
func (c *haCluster) buildImages() {
	c.t.Helper()
	etcdCtx, mgrCtx := c.t.TempDir(), c.t.TempDir()
	// One go build for the three: it shares the work they have in common.
	out := c.t.TempDir()
	started := time.Now()
	haGoBuild(c.t, out, ".", "./plugins/simulator", "./testdata/ha/etcdserver")
	c.t.Logf("built the static binaries in %s", time.Since(started).Round(time.Second))
	for from, to := range map[string]string{
		"infrakit":   filepath.Join(mgrCtx, "infrakit"),
		"simulator":  filepath.Join(mgrCtx, "infrakit-provider-simulator"),
		"etcdserver": filepath.Join(etcdCtx, "etcdserver"),
	} {
		if err := os.Rename(filepath.Join(out, from), to); err != nil {
			c.t.Fatal(err)
		}
	}
	for _, img := range []struct{ dockerfile, dir, tag string }{
		{"etcd.Dockerfile", etcdCtx, c.etcdImage},
		{"manager.Dockerfile", mgrCtx, c.mgrImage},
	} {
		copyFile(c.t, filepath.Join("..", "testdata", "ha", img.dockerfile), filepath.Join(img.dir, "Dockerfile"))
		c.docker("build", "-q", "--force-rm", "--label", c.label, "-t", img.tag, img.dir)
	}
}

// haGoBuild builds the main packages pkgs (relative to the module root) as
// static binaries into the directory dir, each named as its directory.
func haGoBuild(t *testing.T, dir string, pkgs ...string) {
	t.Helper()
	// No -trimpath: with the CGO_ENABLED=0 that GNUmakefile exports, these
	// are the very compilations make build cached.
	cmd := exec.Command("go", append([]string{"build", "-o", dir + string(filepath.Separator)}, pkgs...)...)
	cmd.Dir = ".."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("CGO_ENABLED=0 go build %s: %v\n%s", strings.Join(pkgs, " "), err, b)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func (c *haCluster) createNetworks() {
	c.t.Helper()
	for _, n := range []string{c.clusterNet, c.adminNet} {
		c.docker("network", "create", "--label", c.label, n)
	}
}

// startEtcd starts etcd on the cluster network as "etcd" and waits until
// it serves.
func (c *haCluster) startEtcd() {
	c.t.Helper()
	c.docker("run", "-d", "--name", c.etcdName, "--label", c.label,
		"--network", c.clusterNet, "--network-alias", "etcd", c.etcdImage)
	deadline := time.Now().Add(haWait)
	for {
		cmd := exec.Command("docker", "logs", c.etcdName)
		out, _ := cmd.CombinedOutput()
		if bytes.Contains(out, []byte("etcdserver: serving")) {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("etcd does not serve after %s:\n%s", haWait, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// managerArgs are the docker run/create options every manager container
// (and the one-shot init and apply containers of a manager) takes.
func (c *haCluster) managerArgs(workdir string) []string {
	return []string{
		"--label", c.label, "--network", c.clusterNet, "--user", c.user,
		"--tmpfs", "/tmp", // go-plugin's sockets
		"-v", workdir + ":/stack",
		"-v", c.simDir + ":/sim", "-e", "INFRAKIT_SIMULATOR_DIR=/sim",
	}
}

// initManagers gives each manager its working directory holding c.stack
// and runs `infrakit init` there, in a container on the cluster network:
// it installs the simulator from beside the infrakit binary and records
// the etcd backend.
func (c *haCluster) initManagers() {
	c.t.Helper()
	for i, name := range c.managerNames() {
		wd := c.t.TempDir()
		copyFile(c.t, c.stack, filepath.Join(wd, "main.hcl"))
		args := append([]string{"run", "--rm"}, c.managerArgs(wd)...)
		c.docker(append(args, c.mgrImage, "init")...)
		if _, err := os.Stat(filepath.Join(wd, ".infrakit", "backend.json")); err != nil {
			c.t.Fatalf("init recorded no backend in %s: %v", wd, err)
		}
		c.managers = append(c.managers, &haManager{name: name, host: fmt.Sprintf("m%d", i+1), workdir: wd})
	}
}

// apply runs `infrakit apply` from the first manager's working directory,
// before any watch runs: the state in etcd then holds the stack.
func (c *haCluster) apply() {
	c.t.Helper()
	args := append([]string{"run", "--rm"}, c.managerArgs(c.managers[0].workdir)...)
	out := c.docker(append(args, c.mgrImage, "apply", "-auto-approve")...)
	c.t.Logf("apply from %s:\n%s", c.managers[0].host, out)
}

// startManagers starts `infrakit watch` in each manager's container,
// attached to both networks, and waits until each serves its status.
func (c *haCluster) startManagers() {
	c.t.Helper()
	c.launchManagers()
	c.waitRounds("every manager to serve /v1/status", nil, func(r haRound) bool {
		for _, s := range r {
			if s.err != nil {
				return false
			}
		}
		return true
	})
}

// launchManagers starts `infrakit watch` in each manager's container,
// attached to both networks, and learns each one's status URL on the
// admin network; it does not wait for them to serve.
func (c *haCluster) launchManagers() {
	c.t.Helper()
	// Listening on the admin network, not loopback, needs TLS. Reads are
	// public: the test reads every manager's status, each with its own
	// token.
	ca := newTestCA(c.t, c.t.TempDir())
	c.client.Transport = &http.Transport{DisableKeepAlives: true, TLSClientConfig: ca.clientConfig(testTLSName)}
	for _, m := range c.managers {
		copyFile(c.t, ca.CertFile, filepath.Join(m.workdir, "tls.crt"))
		copyFile(c.t, ca.KeyFile, filepath.Join(m.workdir, "tls.key"))
		args := append([]string{"create", "--name", m.name, "--hostname", m.host}, c.managerArgs(m.workdir)...)
		c.docker(append(args, c.mgrImage, "watch", "-listen", "0.0.0.0:"+strconv.Itoa(haStatusPort), "-interval", "1s",
			"-tls-cert", "/stack/tls.crt", "-tls-key", "/stack/tls.key", "-public-read")...)
		c.docker("network", "connect", c.adminNet, m.name)
		c.docker("start", m.name)
		m.status = c.statusURL(m.name)
	}
}

// statusURL is the /v1/status of the manager container on the admin
// network.
func (c *haCluster) statusURL(container string) string {
	c.t.Helper()
	return "https://" + net.JoinHostPort(c.addressOn(c.adminNet, container), strconv.Itoa(haStatusPort)) + "/v1/status"
}

// addressOn is the IP address of container on the Docker network.
func (c *haCluster) addressOn(network, container string) string {
	c.t.Helper()
	ip := c.docker("inspect", "-f", fmt.Sprintf(`{{with index .NetworkSettings.Networks %q}}{{.IPAddress}}{{end}}`, network), container)
	if net.ParseIP(ip) == nil {
		c.t.Fatalf("container %s has no address on %s: %q", container, network, ip)
	}
	return ip
}

// haStatus is the part of GET /v1/status the test reads (website/watch.md).
type haStatus struct {
	Leader         bool   `json:"leader"`
	Identity       string `json:"identity"`
	LeaderIdentity string `json:"leader_identity"`
	Passes         int    `json:"passes"`

	m   *haManager
	err error
}

func (s haStatus) String() string {
	if s.err != nil {
		return fmt.Sprintf("%s: %v", s.m.host, s.err)
	}
	return fmt.Sprintf("%s: identity %q leader %v leader_identity %q", s.m.host, s.Identity, s.Leader, s.LeaderIdentity)
}

// haRound is the status of every manager, read one after another.
type haRound []haStatus

func (r haRound) leaders() []haStatus {
	var out []haStatus
	for _, s := range r {
		if s.err == nil && s.Leader {
			out = append(out, s)
		}
	}
	return out
}

func (r haRound) String() string {
	parts := make([]string, len(r))
	for i, s := range r {
		parts[i] = s.String()
	}
	return "[" + strings.Join(parts, "; ") + "]"
}

func (c *haCluster) round() haRound {
	r := make(haRound, len(c.managers))
	for i, m := range c.managers {
		r[i] = c.status(m)
	}
	return r
}

func (c *haCluster) status(m *haManager) haStatus {
	s := haStatus{m: m}
	s.err = getJSON(c.client, m.status, &s)
	return s
}

// getJSON decodes the JSON answer to GET url into v.
func getJSON(client *http.Client, url string, v any) error {
	resp, err := client.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("GET %s: %w", url, err)
	}
	return nil
}

// waitRounds reads every manager's status every 50 ms until done says the
// cluster got there, and fails the test after haWait. Every round is
// checked for two leaders at once, and passed to check (if not nil) for
// what the phase forbids.
func (c *haCluster) waitRounds(what string, check func(haRound), done func(haRound) bool) haRound {
	c.t.Helper()
	deadline := time.Now().Add(haWait)
	var last haRound
	for {
		last = c.round()
		if l := last.leaders(); len(l) > 1 {
			c.t.Errorf("two managers lead at once: %s", last)
		}
		if check != nil {
			check(last)
		}
		if done(last) {
			return last
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("waited %s for %s; last round: %s", haWait, what, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (c *haCluster) instanceDir() string {
	return filepath.Join(c.simDir, "instances", "compute")
}

// instances lists the IDs of the simulator's compute instances: what the
// shared "cloud" holds, read from its files.
func (c *haCluster) instances() []string {
	c.t.Helper()
	ids, err := haInstanceIDs(c.instanceDir())
	if err != nil {
		c.t.Fatal(err)
	}
	return ids
}

func haInstanceIDs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range entries {
		// Temporary files start with a dot (plugins/simulator/store).
		if name := e.Name(); !strings.HasPrefix(name, ".") && strings.HasSuffix(name, ".json") {
			ids = append(ids, strings.TrimSuffix(name, ".json"))
		}
	}
	return ids, nil
}

// haSampler counts the simulator's instances every 10 ms in a goroutine it
// owns, keeping the highest count.
type haSampler struct {
	stopOnce sync.Once
	done     chan struct{}
	wg       sync.WaitGroup
	peak     int
	samples  int
	err      error
}

func (c *haCluster) startSampler() *haSampler {
	s := &haSampler{done: make(chan struct{})}
	dir := c.instanceDir()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			ids, err := haInstanceIDs(dir)
			if err != nil && s.err == nil {
				s.err = err
			}
			s.samples++
			s.peak = max(s.peak, len(ids))
			select {
			case <-s.done:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

// stop ends the sampling (once) and returns the highest count, how many
// samples were taken and the first error reading the store.
func (s *haSampler) stop() (peak, samples int, err error) {
	s.stopOnce.Do(func() {
		close(s.done)
		s.wg.Wait()
	})
	return s.peak, s.samples, s.err
}

func haMS(d time.Duration) string { return fmt.Sprintf("%dms", d.Milliseconds()) }
