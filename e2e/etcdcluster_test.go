package e2e

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// TestEtcdClusterHeals runs testdata/etcd-cluster's stack: apply forms a
// cluster of 3 healthy started members; under `infrakit watch` a member
// killed with `docker kill` is replaced, the dead member is no longer
// listed, and a key written before the kill is read through the new
// member; a rolling update of all 3 never loses the quorum (a writer puts
// a key every 100 ms throughout, and no run of failed puts lasts longer
// than an election timeout); scaling to 5 adds two members and back to 3
// removes them; destroy leaves no container.
func TestEtcdClusterHeals(t *testing.T) {
	t.Parallel()
	e := newEtcdEnv(t)
	w := e.w
	w.init()
	lids := e.lids(3)
	start := time.Now()
	w.ok("apply", "-auto-approve")
	t.Logf("apply: returned after %s", time.Since(start).Round(time.Millisecond))
	v := e.waitHealthy("apply", lids...)
	if labelled := strings.Fields(e.docker("ps", "-q", "--filter", "label=infrakit.group=etcd", "--filter", "label=infrakit.stack="+e.stack)); len(labelled) != 3 {
		t.Fatalf("%d containers labelled infrakit.group=etcd, want 3", len(labelled))
	}
	put := e.client(lids...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := put.Put(ctx, "before-kill", "kept")
	cancel()
	put.Close()
	if err != nil {
		t.Fatalf("put before the kill: %v", err)
	}

	p := w.startWatch(nil, "-interval", "1s", "-brake-settle", "2s")
	within(t, time.Minute, "watch's first pass", func() bool { return p.status().Passes > 0 })
	e.healKill(lids, v)
	c := e.client(lids...)
	defer c.Close()
	env := e.rollUnderWrites(c, lids)

	// 3 → 5 → 3.
	e.writeStack(5, env)
	w.ok("apply", "-auto-approve")
	five := e.lids(5)
	e.waitHealthy("scale to 5", five...)
	atFive := e.containers()
	e.writeStack(3, env)
	w.ok("apply", "-auto-approve")
	v = e.waitHealthy("scale to 3", lids...)
	if slices.ContainsFunc(v.members, func(m etcdMember) bool { return m.name == five[3] || m.name == five[4] }) {
		t.Fatalf("after scaling to 3 the member list still names %s or %s: %s", five[3], five[4], v)
	}
	if now := e.containers(); !maps.Equal(now, map[string]string{lids[0]: atFive[lids[0]], lids[1]: atFive[lids[1]], lids[2]: atFive[lids[2]]}) {
		t.Fatalf("after scaling to 3 the containers are %v; want the first three of %v, untouched", now, atFive)
	}

	if code, took := p.terminate(); code != 0 {
		t.Fatalf("watch exited %d after SIGTERM (%s)\n%s", code, took, p.stderr)
	}
	w.ok("destroy", "-auto-approve")
	if left := strings.Fields(e.docker("ps", "-aq", "--filter", "label=infrakit.stack="+e.stack)); len(left) > 0 {
		t.Fatalf("after destroy %d containers of the stack are left: %q", len(left), left)
	}
}

// healKill kills the container of the second member with `docker kill`
// and waits until it is replaced by a member at the same address, the
// dead one no longer listed, and a key put before (before-kill) is read
// through the new member.
func (e *etcdEnv) healKill(lids []string, v clusterView) {
	t := e.t
	t.Helper()
	victim := lids[1]
	before := e.containers()
	dead := memberID(t, v, victim)
	e.docker("kill", before[victim])
	start := time.Now()
	etcdWithin(t, 3*time.Minute, "a new container for "+victim, func() bool {
		now := e.containers()[victim]
		return now != "" && now != before[victim]
	})
	v = e.waitHealthy("docker kill "+before[victim], lids...)
	t.Logf("docker kill: 3 healthy members again after %s", time.Since(start).Round(time.Millisecond))
	if slices.ContainsFunc(v.members, func(m etcdMember) bool { return m.id == dead }) {
		t.Fatalf("the killed member %x is still listed: %s", dead, v)
	}
	fresh := e.client(victim)
	defer fresh.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	got, err := fresh.Get(ctx, "before-kill")
	if err != nil || len(got.Kvs) != 1 || string(got.Kvs[0].Value) != "kept" {
		t.Fatalf("reading before-kill through the new member %s: %v %v", victim, got, err)
	}
}

// rollUnderWrites changes an env property of the members and applies it,
// which replaces all of them one at a time, while a writer puts a key
// every 100 ms through c; no run of failed puts may last longer than an
// election timeout. It returns the env now applied.
func (e *etcdEnv) rollUnderWrites(c *clientv3.Client, lids []string) map[string]string {
	t := e.t
	t.Helper()
	writer := startEtcdWriter(c)
	old := e.containers()
	env := map[string]string{"ETCD_SNAPSHOT_COUNT": "5000"}
	e.writeStack(3, env)
	start := time.Now()
	e.w.ok("apply", "-auto-approve")
	t.Logf("rolling update: apply returned after %s", time.Since(start).Round(time.Millisecond))
	e.waitHealthy("rolling update", lids...)
	puts, longest, failures := writer.halt()
	now := e.containers()
	for _, id := range lids {
		if now[id] == old[id] {
			t.Errorf("the container of %s (%s) was not replaced by the roll", id, old[id])
		}
	}
	t.Logf("rolling update: %d puts, the longest run of failures %s; failures: %q", puts, longest.Round(time.Millisecond), failures)
	// A run of failures is measured from the start of its first put, which
	// waits up to writerTimeout before it is known to fail: the cluster was
	// unavailable for at most that much less. Losing the quorum would show
	// as seconds of failures (a member is replaced in several).
	if bound := etcdElection + writerTimeout; longest > bound {
		t.Errorf("during the roll puts failed for %s in a row: the cluster was without a leader or a quorum for longer than the election timeout %s (bound %s with the put timeout); failures: %q",
			longest.Round(time.Millisecond), etcdElection, bound, failures)
	}
	return env
}

// memberID is the ID of the member named name in v.
func memberID(t *testing.T, v clusterView, name string) uint64 {
	t.Helper()
	for _, m := range v.members {
		if m.name == name {
			return m.id
		}
	}
	t.Fatalf("no member %s in %s", name, v)
	return 0
}

// TestEtcdClusterValidate: an even number of members is accepted with a
// warning, and a logical ID that cannot be a member's address is an error
// at that logical ID in the stack file. validate does not need Docker.
func TestEtcdClusterValidate(t *testing.T) {
	t.Parallel()
	src := func(lids string) string {
		return `stack "v" {}
provider "docker" {}
provider "etcdmember" {}
group "etcd" {
  logical_ids = [` + lids + `]
  instance {
    provider   = docker
    type       = "container"
    properties = { image = "infrakit-etcd:latest", network = "n", fixed_ip = true }
  }
  flavor { provider = etcdmember }
}
`
	}
	type diag struct {
		Severity, Summary, Detail string
		Range                     *struct {
			Start struct{ Line, Column int }
		}
	}
	validate := func(lids string, code int) []diag {
		t.Helper()
		w := newWorkdir(t)
		w.writeFile("stack.hcl", src(lids))
		w.init()
		res := w.expect(code, "validate", "-json")
		var out struct {
			Diagnostics []diag `json:"diagnostics"`
		}
		if err := json.Unmarshal([]byte(res.stdout), &out); err != nil {
			t.Fatalf("validate -json: %v\n%s", err, res)
		}
		return out.Diagnostics
	}

	ds := validate(`"10.1.0.1", "10.1.0.2", "10.1.0.3", "10.1.0.4"`, 0)
	if len(ds) != 1 || ds[0].Severity != "warning" || ds[0].Summary != "Even number of etcd members" || !strings.Contains(ds[0].Detail, "4 members tolerate the loss of 1") {
		t.Fatalf("4 members: %+v; want one warning about an even number", ds)
	}

	ds = validate(`"10.1.0.1", "db_2", "10.1.0.3"`, 1)
	if len(ds) != 1 || ds[0].Severity != "error" || ds[0].Summary != "Invalid member address" || ds[0].Range == nil ||
		ds[0].Range.Start.Line != 5 || ds[0].Range.Start.Column != 30 || !strings.Contains(ds[0].Detail, `"db_2"`) {
		t.Fatalf("logical ID db_2: %+v; want one error at stack.hcl:5:30", ds)
	}
}

// etcdGroupStatus is group etcd in watch's status, as a script reads it.
type etcdGroupStatus struct {
	Passes int
	Actual int `json:"actual"`
	Health struct {
		Healthy, Unhealthy, Unknown int
	} `json:"health"`
	Brake struct {
		Engaged bool   `json:"engaged"`
		Reason  string `json:"reason"`
	} `json:"brake"`
	LastError string `json:"last_error"`
}

func (p *watchProc) etcdGroup() etcdGroupStatus {
	p.t.Helper()
	var s struct {
		Passes int               `json:"passes"`
		Groups []json.RawMessage `json:"groups"`
	}
	p.get("/v1/status", &s)
	for _, raw := range s.Groups {
		var g struct {
			Name string `json:"name"`
			etcdGroupStatus
		}
		if err := json.Unmarshal(raw, &g); err == nil && g.Name == "etcd" {
			g.etcdGroupStatus.Passes = s.Passes
			return g.etcdGroupStatus
		}
	}
	return etcdGroupStatus{Passes: s.Passes}
}

// TestEtcdClusterQuorumLoss: losing 2 of 3 members at once engages the
// mass-failure brake (the stack's health { brake_min = 2 }), the survivor
// is judged unknown (never unhealthy), and nothing is replaced while there
// is no quorum: once the brake releases, a replacement that is tried
// cannot join, and the flavor says why, pass after pass. Then the person's
// action of the walk-through (website/etcd-cluster.md): read what is
// needed from the survivor (serializable reads work without a quorum),
// remove it, and watch forms a new cluster of all three, into which the
// data is put back.
func TestEtcdClusterQuorumLoss(t *testing.T) {
	t.Parallel()
	e := newEtcdEnv(t)
	w := e.w
	w.init()
	lids := e.lids(3)
	w.ok("apply", "-auto-approve")
	e.waitHealthy("apply", lids...)
	c := e.client(lids...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := c.Put(ctx, "precious", "kept")
	cancel()
	c.Close()
	if err != nil {
		t.Fatal(err)
	}

	p := w.startWatch(nil, "-interval", "1s", "-brake-settle", "2s")
	within(t, time.Minute, "watch's first pass", func() bool { return p.status().Passes > 0 })
	before := e.containers()
	survivor := lids[0]
	// The two are cut off from the network before they are killed: one
	// `docker kill` of two containers kills them one after the other, and
	// a pass started by the first death could otherwise find a quorum
	// (the survivor and the second, not yet dead) and add a replacement
	// in that gap. Cut off, they leave the survivor without a quorum
	// before either dies, as a real loss of two at once would.
	for _, lid := range lids[1:] {
		e.docker("network", "disconnect", "--force", e.network, before[lid])
	}
	e.docker("kill", before[lids[1]], before[lids[2]])

	// The brake engages: 2 of the 3 members died at once, a majority and
	// brake_min. Its event stays in /v1/events after it releases (with
	// -brake-settle 2s it holds a few seconds), and watch logs it.
	var g etcdGroupStatus
	explain := func() {
		t.Logf("status of group etcd: %+v; containers: %v; events: %v", g, e.containers(), p.mbbEvents())
	}
	var brake mbbEvent
	etcdWithin(t, 2*time.Minute, "the mass-failure brake engaged on group etcd", func() bool {
		evs := p.mbbEvents()
		i := slices.IndexFunc(evs, func(ev mbbEvent) bool { return ev.Kind == "brake" && ev.Group == "etcd" })
		if i >= 0 {
			brake = evs[i]
		}
		return i >= 0
	}, explain)
	if !strings.Contains(brake.Message, "2 of 3 members") {
		t.Fatalf("brake event %s; want it to count 2 of 3 members dead", brake)
	}
	if log := p.stderr.String(); !strings.Contains(log, "mass-failure brake engaged") || !strings.Contains(log, "group=etcd") {
		t.Fatalf("watch's log does not say the brake engaged on group etcd:\n%s", log)
	}
	t.Logf("brake: %s", brake)

	// Once the world holds still the brake releases and the two vanished
	// pets are owed their replacements; the flavor refuses each, since a
	// member cannot be added to a cluster without a quorum, and says so.
	// The survivor is judged unknown, never unhealthy, so it is not
	// replaced either.
	etcdWithin(t, 2*time.Minute, "a replacement refused for want of a quorum", func() bool {
		g = p.etcdGroup()
		return strings.Contains(g.LastError, "no quorum")
	}, explain)
	t.Logf("refused: %s", g.LastError)
	from := g.Passes
	etcdWithin(t, 2*time.Minute, "5 more passes with the survivor unknown", func() bool {
		g = p.etcdGroup()
		return g.Passes >= from+5 && g.Health.Unknown == 1
	}, explain)
	if now := e.containers(); !maps.Equal(now, map[string]string{survivor: before[survivor]}) {
		t.Fatalf("without a quorum the containers are %v; want the survivor %s alone", now, before[survivor])
	}
	if g.Health.Healthy != 0 || g.Health.Unhealthy != 0 || g.Actual != 1 {
		t.Fatalf("group etcd is %+v; want the survivor alone, unknown", g)
	}
	for _, ev := range p.mbbEvents() {
		if ev.Group == "etcd" && ev.Kind == "created" {
			t.Fatalf("without a quorum watch made a member: %s", ev)
		}
	}

	// The person's action: save the data from the survivor, remove it.
	sc := e.client(survivor)
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	saved, err := sc.Get(ctx, "precious", clientv3.WithSerializable())
	cancel()
	sc.Close()
	if err != nil || len(saved.Kvs) != 1 || string(saved.Kvs[0].Value) != "kept" {
		t.Fatalf("serializable read from the survivor: %v %v", saved, err)
	}
	e.docker("rm", "-f", before[survivor])
	e.waitHealthy("after the survivor was removed", lids...)
	c = e.client(lids...)
	defer c.Close()
	ctx, cancel = context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Put(ctx, "precious", string(saved.Kvs[0].Value)); err != nil {
		t.Fatalf("putting the saved data back: %v", err)
	}
	if code, took := p.terminate(); code != 0 {
		t.Fatalf("watch exited %d after SIGTERM (%s)\n%s", code, took, p.stderr)
	}
}
