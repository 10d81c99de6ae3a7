package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// What TestScaleOutDocker reads of etcd: the history of the keys under the
// stack's prefix as the test saw it happen, the groups' tenures (who held
// each group's owner key, from which revision to which) and which writes
// of the state belong to which group.

// soEtcdClient is a client of the cluster's etcd from the test, over the
// cluster network (the test's host reaches the containers' addresses).
func (c *haCluster) soEtcdClient() *clientv3.Client {
	c.t.Helper()
	ip := c.addressOn(c.clusterNet, c.etcdName)
	client, err := clientv3.New(clientv3.Config{
		Endpoints:   []string{"http://" + net.JoinHostPort(ip, "2379")},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = client.Close() })
	return client
}

// soEvent is one change of a key under the stack's prefix, as the test's
// watch saw it, with when it arrived.
type soEvent struct {
	at      time.Time
	del     bool
	key     string // without the prefix and its slash
	value   string // the new value; of a deletion, the value deleted
	rev     int64  // the revision of the change
	created int64  // the key's create revision (of a deletion, the old one's)
}

// soHistory watches every key under a prefix in a goroutine it owns and
// keeps what it sees, each change stamped with its arrival.
type soHistory struct {
	prefix string
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	events []soEvent
	err    error
}

// watchHistory follows prefix from revision from on.
func watchHistory(client *clientv3.Client, prefix string, from int64) *soHistory {
	ctx, cancel := context.WithCancel(context.Background())
	h := &soHistory{prefix: prefix, cancel: cancel, done: make(chan struct{})}
	ch := client.Watch(clientv3.WithRequireLeader(ctx), prefix+"/", clientv3.WithPrefix(), clientv3.WithRev(from), clientv3.WithPrevKV())
	go func() {
		defer close(h.done)
		for wr := range ch {
			now := time.Now()
			h.mu.Lock()
			if err := wr.Err(); err != nil && ctx.Err() == nil && h.err == nil {
				h.err = err
			}
			for _, ev := range wr.Events {
				h.events = append(h.events, h.event(ev, now))
			}
			h.mu.Unlock()
		}
	}()
	return h
}

func (h *soHistory) event(ev *clientv3.Event, at time.Time) soEvent {
	e := soEvent{at: at, key: strings.TrimPrefix(string(ev.Kv.Key), h.prefix+"/"), rev: ev.Kv.ModRevision}
	if ev.Type == mvccpb.DELETE {
		e.del = true
		if ev.PrevKv != nil {
			e.value, e.created = string(ev.PrevKv.Value), ev.PrevKv.CreateRevision
		}
		return e
	}
	e.value, e.created = string(ev.Kv.Value), ev.Kv.CreateRevision
	return e
}

// snapshot is every change seen so far, and the watch's error if it broke.
func (h *soHistory) snapshot() ([]soEvent, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.events), h.err
}

// stop ends the watch and waits for its goroutine; later calls do nothing.
func (h *soHistory) stop() {
	h.cancel()
	<-h.done
}

// soTenure is one lease of a group by a member: its owner key from its
// creation (revision from, seen at fromAt) to its deletion (to; 0 while it
// stands).
type soTenure struct {
	member       string
	from, to     int64
	fromAt, toAt time.Time
}

// tenures is each group's owner keys (owners/group/<name>) over the
// history, in order.
func tenures(events []soEvent) map[string][]soTenure {
	out := map[string][]soTenure{}
	for _, e := range events {
		name, ok := strings.CutPrefix(e.key, "owners/group/")
		if !ok {
			continue
		}
		ts := out[name]
		switch {
		case e.del:
			if n := len(ts); n > 0 && ts[n-1].to == 0 {
				ts[n-1].to, ts[n-1].toAt = e.rev, e.at
			}
		case e.rev == e.created:
			ts = append(ts, soTenure{member: e.value, from: e.rev, fromAt: e.at})
		}
		out[name] = ts
	}
	return out
}

// ownerAt is the tenure of group's owner key standing at revision rev.
func ownerAt(ts []soTenure, rev int64) (soTenure, bool) {
	for _, t := range ts {
		if t.from <= rev && (t.to == 0 || rev < t.to) {
			return t, true
		}
	}
	return soTenure{}, false
}

// stateWriteOf is the group a change of the state under the prefix writes,
// if its key names one of groups as a path segment (the split layout keeps
// at least one key per group; internal/state/etcd).
func stateWriteOf(e soEvent, groups []string) (string, bool) {
	if e.del || !strings.HasPrefix(e.key, "state") {
		return "", false
	}
	for _, seg := range strings.Split(e.key, "/") {
		if slices.Contains(groups, seg) {
			return seg, true
		}
	}
	return "", false
}

// The tests below check the pure parts of TestScaleOutDocker's verdicts on
// made-up observations: they must catch what they are for, which a Docker
// run that goes well never shows.

func soAt(ms int) time.Time { return time.Unix(0, 0).Add(time.Duration(ms) * time.Millisecond) }

func TestScaleOutTenures(t *testing.T) {
	events := []soEvent{
		{key: "owners/group/g1", value: "a", rev: 10, created: 10, at: soAt(1)},
		{key: "state/group/g1/h1", value: "{}", rev: 11, created: 11},
		{key: "owners/group/g1", del: true, value: "a", rev: 20, created: 10, at: soAt(2)},
		{key: "state/group/g1/h2", value: "{}", rev: 21, created: 21},
		{key: "owners/group/g1", value: "b", rev: 30, created: 30, at: soAt(3)},
		{key: "owners/group/g1", value: "b", rev: 31, created: 30}, // an update: no new tenure
		{key: "state/group/g1/h3", value: "{}", rev: 32, created: 32},
		{key: "state/meta/h4", value: "{}", rev: 33, created: 33},
	}
	ts := tenures(events)["g1"]
	if len(ts) != 2 || ts[0] != (soTenure{member: "a", from: 10, to: 20, fromAt: soAt(1), toAt: soAt(2)}) || ts[1].member != "b" || ts[1].to != 0 {
		t.Fatalf("tenures = %+v", ts)
	}
	var owners []string
	for _, e := range events {
		if g, ok := stateWriteOf(e, soGroups); ok {
			o, ok := ownerAt(ts, e.rev)
			owners = append(owners, fmt.Sprintf("%s@%d:%s/%v", g, e.rev, o.member, ok))
		}
	}
	if want := []string{"g1@11:a/true", "g1@21:/false", "g1@32:b/true"}; !slices.Equal(owners, want) {
		t.Errorf("state writes by owner = %v, want %v", owners, want)
	}
}

// soRead is a status read of m from ms from to ms to, claiming mine.
func soRead(m *haManager, from, to int, mine ...string) soStatus {
	s := soStatus{m: m, sent: soAt(from), recv: soAt(to), ScaleOut: &soInfo{Member: m.host}}
	for _, g := range mine {
		s.ScaleOut.Objects = append(s.ScaleOut.Objects, soObject{Kind: "group", Name: g, Mine: true})
	}
	return s
}

func TestScaleOutDoubleClaims(t *testing.T) {
	x, y := &haManager{host: "x"}, &haManager{host: "y"}
	failed := soStatus{m: x, sent: soAt(6), recv: soAt(7), err: os.ErrDeadlineExceeded}
	for _, c := range []struct {
		name   string
		xs, ys []soStatus
		want   int
	}{
		{"handover between reads", []soStatus{soRead(x, 0, 5, "g1"), soRead(x, 10, 15)}, []soStatus{soRead(y, 20, 25, "g1")}, 0},
		{"overlapping windows", []soStatus{soRead(x, 0, 5, "g1"), soRead(x, 10, 15, "g1")}, []soStatus{soRead(y, 4, 11, "g1")}, 0},
		{"held across", []soStatus{soRead(x, 0, 5, "g1"), soRead(x, 10, 15, "g1")}, []soStatus{soRead(y, 6, 9, "g1")}, 1},
		{"released in between", []soStatus{soRead(x, 0, 5, "g1"), soRead(x, 6, 7), soRead(x, 10, 15, "g1")}, []soStatus{soRead(y, 8, 9, "g1")}, 0},
		{"dead in between", []soStatus{soRead(x, 0, 5, "g1"), failed, soRead(x, 10, 15, "g1")}, []soStatus{soRead(y, 8, 9, "g1")}, 0},
		{"other group", []soStatus{soRead(x, 0, 5, "g2"), soRead(x, 10, 15, "g2")}, []soStatus{soRead(y, 6, 9, "g1")}, 0},
	} {
		if got := doubleClaims(map[*haManager][]soStatus{x: c.xs, y: c.ys}); len(got) != c.want {
			t.Errorf("%s: doubleClaims = %v, want %d", c.name, got, c.want)
		}
	}
}

// soShared is the round of managers each claiming its groups of shares,
// every view naming every group's owner.
func soShared(shares ...[]string) soRound {
	owner := map[string]string{}
	for i, gs := range shares {
		for _, g := range gs {
			owner[g] = fmt.Sprint(i)
		}
	}
	var r soRound
	for i, gs := range shares {
		s := soRead(&haManager{host: fmt.Sprint(i)}, 0, 1, gs...)
		s.ScaleOut.Members = make([]struct {
			ID       string `json:"id"`
			Identity string `json:"identity"`
		}, len(shares))
		for _, g := range soGroups {
			if !slices.Contains(gs, g) {
				s.ScaleOut.Objects = append(s.ScaleOut.Objects, soObject{Kind: "group", Name: g})
			}
		}
		for k := range s.ScaleOut.Objects {
			s.ScaleOut.Objects[k].Owner = owner[s.ScaleOut.Objects[k].Name]
		}
		r = append(r, s)
	}
	return r
}

func TestScaleOutBalanced(t *testing.T) {
	for _, c := range []struct {
		name   string
		shares [][]string
		want   bool
	}{
		{"3/3/3", [][]string{{"g1", "g2", "g3"}, {"g4", "g5", "g6"}, {"g7", "g8", "g9"}}, true},
		{"4/3/2", [][]string{{"g1", "g2", "g3", "g4"}, {"g5", "g6", "g7"}, {"g8", "g9"}}, true},
		{"5/1/3", [][]string{{"g1", "g2", "g3", "g4", "g5"}, {"g6"}, {"g7", "g8", "g9"}}, false},
		{"g3 owned twice", [][]string{{"g1", "g2", "g3"}, {"g3", "g5", "g6"}, {"g7", "g8", "g9"}}, false},
		{"g9 unowned", [][]string{{"g1", "g2", "g3"}, {"g4", "g5", "g6"}, {"g7", "g8"}}, false},
	} {
		if got := soBalanced(soShared(c.shares...), soGroups); got != c.want {
			t.Errorf("%s: soBalanced = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestScaleOutPromText(t *testing.T) {
	p := promText("# HELP x\ninfrakit_group_passes_total{group=\"g1\"} 3\ninfrakit_group_passes_total{group=\"g2\"} 4\n" +
		"infrakit_fenced_writes_refused_total 2\ninfrakit_fenced_writes_refused_totalx 9\n")
	if v, ok := p.sum("infrakit_fenced_writes_refused_total", nil); !ok || v != 2 {
		t.Errorf("sum = %v, %v; want 2", v, ok)
	}
	if got := p.byLabel("infrakit_group_passes_total", "group"); !maps.Equal(got, map[string]float64{"g1": 3, "g2": 4}) {
		t.Errorf("byLabel = %v", got)
	}
}
