package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// The etcd cluster tests run testdata/etcd-cluster's stack (etcd members as
// pets on the local Docker Engine, joined, judged and removed by the
// etcdmember flavor) with the real binaries, each on a Docker network of
// its own with a subnet of its own, and look at the cluster through etcd's
// official client, at the containers' addresses on that network only.

// etcdElection is the election timeout testdata/etcd-cluster/stack.hcl
// configures (ETCD_ELECTION_TIMEOUT).
const etcdElection = time.Second

// etcdEnv is one etcd cluster test's stack directory and what it made.
type etcdEnv struct {
	t       *testing.T
	w       *workdir
	stack   string
	image   string
	network string
	prefix  string // the network's first three octets: "10.213.57"
}

// newEtcdEnv skips the test without a Docker Engine; otherwise it builds
// the etcd image under a tag of its own, creates a network with an
// unusual private /24 of its own, and writes testdata/etcd-cluster's
// stack into a workdir, rewritten to use them.
func newEtcdEnv(t *testing.T) *etcdEnv {
	t.Helper()
	if out, err := dockerRun("version", "--format", "{{.Server.Version}}"); err != nil {
		t.Skipf("no Docker Engine answers (docker version: %v): %s", err, strings.TrimSpace(out))
	}
	if _, err := os.Stat("/usr/bin/etcd"); err != nil {
		t.Fatal("/usr/bin/etcd is missing (Debian's etcd-server package): the member image is built around it")
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	suffix := hex.EncodeToString(b[:])
	e := &etcdEnv{t: t, stack: "e2e-etcd-" + suffix, image: "infrakit-etcd:e2e-" + suffix, network: "ik-etcd-" + suffix}
	start := time.Now()
	if out, err := dockerRunIn("..", "bash", "testdata/etcd-cluster/build-image.sh", e.image); err != nil {
		t.Fatalf("build the etcd image: %v\n%s", err, out)
	}
	t.Logf("built %s in %s", e.image, time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { e.cleanup("rmi", "-f", e.image) })
	e.createNetwork()
	t.Cleanup(func() { e.cleanup("network", "rm", e.network) })
	t.Cleanup(e.removeContainers)
	e.w = newWorkdir(t)
	e.writeStack(3, nil)
	return e
}

// createNetwork creates the test's network on a random /24 of
// 10.213.64.0/18, trying another when Docker says it overlaps one in use.
func (e *etcdEnv) createNetwork() {
	e.t.Helper()
	var out string
	var err error
	for range 8 {
		n, _ := rand.Int(rand.Reader, big.NewInt(128))
		e.prefix = fmt.Sprintf("10.213.%d", 64+n.Int64())
		out, err = dockerRun("network", "create", "--subnet", e.prefix+".0/24", "--label", "infrakit.e2e="+e.stack, e.network)
		if err == nil {
			return
		}
	}
	e.t.Fatalf("docker network create: %v\n%s", err, out)
}

// lids are the logical IDs of n members: .11, .12, ...
func (e *etcdEnv) lids(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s.%d", e.prefix, 11+i)
	}
	return out
}

// writeStack writes testdata/etcd-cluster/stack.hcl with n members, the
// test's names and addresses, and extra env lines for the members.
func (e *etcdEnv) writeStack(n int, extraEnv map[string]string) {
	e.t.Helper()
	src, err := os.ReadFile(filepath.Join("..", "testdata", "etcd-cluster", "stack.hcl"))
	if err != nil {
		e.t.Fatal(err)
	}
	quoted := make([]string, n)
	for i, id := range e.lids(n) {
		quoted[i] = fmt.Sprintf("%q", id)
	}
	env := ""
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range extraEnv {
			if !yield(k) {
				return
			}
		}
	}) {
		env += fmt.Sprintf("\n        %s = %q", k, extraEnv[k])
	}
	stack := string(src)
	for _, r := range [][2]string{
		{`stack "etcd" {}`, fmt.Sprintf("stack %q {}", e.stack)},
		{`logical_ids = ["10.213.40.11", "10.213.40.12", "10.213.40.13"]`, "logical_ids = [" + strings.Join(quoted, ", ") + "]"},
		{`"infrakit-etcd:latest"`, fmt.Sprintf("%q", e.image)},
		{`network  = "infrakit-etcd"`, fmt.Sprintf("network  = %q", e.network)},
		{`ETCD_ELECTION_TIMEOUT   = "1000"`, `ETCD_ELECTION_TIMEOUT   = "1000"` + env},
	} {
		if strings.Count(stack, r[0]) != 1 {
			e.t.Fatalf("testdata/etcd-cluster/stack.hcl no longer holds %s once; update writeStack", r[0])
		}
		stack = strings.Replace(stack, r[0], r[1], 1)
	}
	e.w.writeFile("stack.hcl", stack)
}

func (e *etcdEnv) cleanup(args ...string) {
	if out, err := dockerRun(args...); err != nil {
		e.t.Logf("cleanup: docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func (e *etcdEnv) docker(args ...string) string {
	e.t.Helper()
	out, err := dockerRun(args...)
	if err != nil {
		e.t.Fatalf("docker %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// removeContainers force-removes whatever container of the stack is left.
func (e *etcdEnv) removeContainers() {
	out, err := dockerRun("ps", "-aq", "--filter", "label=infrakit.stack="+e.stack)
	if err != nil {
		e.t.Logf("cleanup: docker ps: %v\n%s", err, out)
		return
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		e.cleanup(append([]string{"rm", "-f"}, ids...)...)
	}
}

// containers maps the logical ID of each running container of the stack
// to its container ID (short).
func (e *etcdEnv) containers() map[string]string {
	e.t.Helper()
	out := e.docker("ps", "--filter", "label=infrakit.stack="+e.stack, "--filter", "label=infrakit.group=etcd",
		"--filter", "status=running", "--format", `{{.ID}} {{.Label "infrakit.logical_id"}}`)
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			m[f[1]] = f[0]
		}
	}
	return m
}

// endpoint is the client URL of the member at logical ID lid.
func endpoint(lid string) string { return "http://" + lid + ":2379" }

// client is an etcd client on the members at lids.
func (e *etcdEnv) client(lids ...string) *clientv3.Client {
	e.t.Helper()
	urls := make([]string, len(lids))
	for i, id := range lids {
		urls[i] = endpoint(id)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: urls, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// clusterView is what etcd's client says of the cluster: the member list
// and, for each member, whether its endpoint answered its status and
// /health.
type clusterView struct {
	members []etcdMember
	err     error
}

type etcdMember struct {
	id      uint64
	name    string
	peer    string
	started bool
	learner bool
	healthy bool
}

func (v clusterView) String() string {
	if v.err != nil {
		return v.err.Error()
	}
	var parts []string
	for _, m := range v.members {
		parts = append(parts, fmt.Sprintf("%x name=%q peer=%s started=%v learner=%v healthy=%v", m.id, m.name, m.peer, m.started, m.learner, m.healthy))
	}
	return strings.Join(parts, "; ")
}

// view lists the members through the members at lids and checks each
// listed member's health as `etcdctl endpoint health` does: a
// linearizable read through that member alone.
func (e *etcdEnv) view(lids ...string) clusterView {
	e.t.Helper()
	c := e.client(lids...)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.MemberList(ctx)
	if err != nil {
		return clusterView{err: err}
	}
	var v clusterView
	for _, m := range resp.Members {
		em := etcdMember{id: m.ID, name: m.Name, started: m.Name != "" && len(m.ClientURLs) > 0, learner: m.IsLearner}
		if len(m.PeerURLs) > 0 {
			em.peer = m.PeerURLs[0]
		}
		if em.started {
			em.healthy = memberHealthy(ctx, m.ClientURLs[0])
		}
		v.members = append(v.members, em)
	}
	slices.SortFunc(v.members, func(a, b etcdMember) int { return strings.Compare(a.peer, b.peer) })
	return v
}

// memberHealthy is `etcdctl endpoint health` of one endpoint: a
// linearizable get through it succeeds.
func memberHealthy(ctx context.Context, url string) bool {
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{url}, DialTimeout: 2 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		return false
	}
	defer c.Close()
	gctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err = c.Get(gctx, "health")
	return err == nil
}

// healthyAt reports whether the cluster's members are exactly the pets at
// lids, every one started, no learner, and healthy.
func (v clusterView) healthyAt(lids ...string) bool {
	if v.err != nil || len(v.members) != len(lids) {
		return false
	}
	for _, m := range v.members {
		if !m.started || m.learner || !m.healthy || !slices.Contains(lids, m.name) || m.peer != "http://"+m.name+":2380" {
			return false
		}
	}
	return true
}

// waitHealthy waits until the cluster is exactly the pets at lids, all
// healthy, each run by a container of the stack, and returns the view.
func (e *etcdEnv) waitHealthy(what string, lids ...string) clusterView {
	e.t.Helper()
	var v clusterView
	var cs map[string]string
	took := etcdWithin(e.t, 3*time.Minute, what+": members "+strings.Join(lids, ", ")+" started and healthy", func() bool {
		v = e.view(lids...)
		cs = e.containers()
		return v.healthyAt(lids...) && len(cs) == len(lids)
	}, func() {
		e.t.Logf("the cluster: %s; containers: %v", v, cs)
		for lid, id := range cs {
			out, _ := dockerRun("logs", "--tail", "15", id)
			e.t.Logf("docker logs of %s (%s):\n%s", lid, id, out)
		}
	})
	e.t.Logf("%s: %d healthy members after %s", what, len(lids), took.Round(time.Millisecond))
	return v
}

// etcdWithin is within, polling every 250 ms: each look at the cluster
// opens clients and runs the docker CLI.
func etcdWithin(t *testing.T, d time.Duration, what string, cond func() bool, explain ...func()) time.Duration {
	t.Helper()
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Since(start) > d {
			for _, f := range explain {
				f()
			}
			t.Fatalf("not within %s: %s", d, what)
		}
		<-tick.C
	}
	return time.Since(start)
}

// writerTimeout bounds each put of etcdWriter.
const writerTimeout = 500 * time.Millisecond

// etcdWriter puts a key every 100 ms through a client on the members,
// until stopped, and records when puts failed.
type etcdWriter struct {
	stop chan struct{}
	done chan struct{}

	mu       sync.Mutex
	puts     int
	failures []string
	// longest is the longest time every put failed: from the start of a
	// failed put to the start of the next put that succeeded.
	longest time.Duration
}

func startEtcdWriter(c *clientv3.Client) *etcdWriter {
	w := &etcdWriter{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		var failingSince time.Time
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				if !failingSince.IsZero() {
					w.note(time.Since(failingSince), "")
				}
				return
			case <-tick.C:
			}
			start := time.Now()
			ctx, cancel := context.WithTimeout(context.Background(), writerTimeout)
			_, err := c.Put(ctx, fmt.Sprintf("writer/%06d", i), start.Format(time.RFC3339Nano))
			cancel()
			switch {
			case err != nil && failingSince.IsZero():
				failingSince = start
				w.note(0, fmt.Sprintf("%s: %v", start.Format("15:04:05.000"), err))
			case err != nil:
				w.note(0, fmt.Sprintf("%s: %v", start.Format("15:04:05.000"), err))
			case !failingSince.IsZero():
				w.note(start.Sub(failingSince), "")
				failingSince = time.Time{}
			}
			w.mu.Lock()
			w.puts++
			w.mu.Unlock()
		}
	}()
	return w
}

func (w *etcdWriter) note(window time.Duration, failure string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.longest = max(w.longest, window)
	if failure != "" && len(w.failures) < 20 {
		w.failures = append(w.failures, failure)
	}
}

// halt stops the writer and returns what it saw.
func (w *etcdWriter) halt() (puts int, longest time.Duration, failures []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.puts, w.longest, slices.Clone(w.failures)
}
