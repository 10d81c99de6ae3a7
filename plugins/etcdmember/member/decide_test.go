package member

import (
	"slices"
	"strings"
	"testing"

	"pgregory.net/rapid"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/provider"
)

var props = Properties{ClientPort: DefaultClientPort, PeerPort: DefaultPeerPort}

func pets(ids ...string) []Pet {
	out := make([]Pet, len(ids))
	for i, id := range ids {
		out[i] = props.PetOf(instance.LogicalID(id))
	}
	return out
}

// started is a member that ran: named, with client URLs.
func started(id uint64, pet Pet) Member {
	return Member{ID: id, Name: pet.Name, PeerURLs: []string{pet.PeerURL}, ClientURLs: []string{pet.ClientURL}}
}

// up is an endpoint that answered, healthy or not.
func up(pet Pet, id uint64, healthy bool) Endpoint {
	return Endpoint{URL: pet.ClientURL, Reached: true, ID: id, Healthy: healthy}
}

func down(pet Pet) Endpoint { return Endpoint{URL: pet.ClientURL} }

func TestDecideJoin(t *testing.T) {
	a, b, c := pets("10.0.0.1", "10.0.0.2", "10.0.0.3")[0], pets("10.0.0.2")[0], pets("10.0.0.3")[0]
	all := []Pet{a, b, c}
	tests := []struct {
		name    string
		o       Observation
		self    Pet
		want    Join
		wantErr string
	}{{
		name: "nothing answers: a new cluster of every pet",
		o:    Observation{Endpoints: []Endpoint{down(a), down(b), down(c)}},
		self: a,
		want: Join{State: "new", InitialCluster: "10.0.0.1=http://10.0.0.1:2380,10.0.0.2=http://10.0.0.2:2380,10.0.0.3=http://10.0.0.3:2380"},
	}, {
		name: "a dead incarnation still listed is removed and the pet added",
		o: Observation{Endpoints: []Endpoint{up(a, 1, true), down(b), up(c, 3, true)},
			Members: []Member{started(1, a), started(2, b), started(3, c)}},
		self: b,
		want: Join{State: "existing", Remove: []uint64{2}, Add: true,
			InitialCluster: "10.0.0.1=http://10.0.0.1:2380,10.0.0.2=http://10.0.0.2:2380,10.0.0.3=http://10.0.0.3:2380"},
	}, {
		name: "removed by a drain: only added",
		o: Observation{Endpoints: []Endpoint{up(a, 1, true), down(b), up(c, 3, true)},
			Members: []Member{started(1, a), started(3, c)}},
		self: b,
		want: Join{State: "existing", Add: true,
			InitialCluster: "10.0.0.1=http://10.0.0.1:2380,10.0.0.2=http://10.0.0.2:2380,10.0.0.3=http://10.0.0.3:2380"},
	}, {
		name: "added by an earlier Prepare and never started: not added twice",
		o: Observation{Endpoints: []Endpoint{up(a, 1, true), down(b), up(c, 3, true)},
			Members: []Member{started(1, a), {ID: 9, PeerURLs: []string{b.PeerURL}}, started(3, c)}},
		self: b,
		want: Join{State: "existing",
			InitialCluster: "10.0.0.1=http://10.0.0.1:2380,10.0.0.2=http://10.0.0.2:2380,10.0.0.3=http://10.0.0.3:2380"},
	}, {
		name: "the initial cluster still forming without a quorum: bootstraps as listed",
		o: Observation{Endpoints: []Endpoint{up(a, 1, false), down(b), down(c)},
			Members: []Member{{ID: 1, Name: a.Name, PeerURLs: []string{a.PeerURL}}, {ID: 2, Name: b.Name, PeerURLs: []string{b.PeerURL}}, {ID: 3, Name: c.Name, PeerURLs: []string{c.PeerURL}}}},
		self: b,
		want: Join{State: "new",
			InitialCluster: "10.0.0.1=http://10.0.0.1:2380,10.0.0.2=http://10.0.0.2:2380,10.0.0.3=http://10.0.0.3:2380"},
	}, {
		name: "added to a cluster that lost its quorum since, never started: joins as listed",
		o: Observation{Endpoints: []Endpoint{up(a, 1, false), down(b), down(c)},
			Members: []Member{started(1, a), {ID: 2, PeerURLs: []string{b.PeerURL}}, started(3, c)}},
		self: b,
		want: Join{State: "existing",
			InitialCluster: "10.0.0.1=http://10.0.0.1:2380,10.0.0.2=http://10.0.0.2:2380,10.0.0.3=http://10.0.0.3:2380"},
	}, {
		name: "two of three lost: no quorum, refused",
		o: Observation{Endpoints: []Endpoint{up(a, 1, false), down(b), down(c)},
			Members: []Member{started(1, a), started(2, b), started(3, c)}},
		self:    b,
		wantErr: "no quorum",
	}, {
		name:    "members answer but none lists the members",
		o:       Observation{Endpoints: []Endpoint{up(a, 1, true), down(b), down(c)}},
		self:    b,
		wantErr: "no member listed",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := DecideJoin(tt.o, tt.self, all)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("DecideJoin = %+v, %v; want an error saying %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.State != tt.want.State || got.Add != tt.want.Add || !slices.Equal(got.Remove, tt.want.Remove) || got.InitialCluster != tt.want.InitialCluster {
				t.Fatalf("DecideJoin =\n%+v\nwant\n%+v", got, tt.want)
			}
		})
	}
}

func TestVerdict(t *testing.T) {
	a, b, c := pets("10.0.0.1")[0], pets("10.0.0.2")[0], pets("10.0.0.3")[0]
	members := []Member{started(1, a), started(2, b), started(3, c)}
	tests := []struct {
		name string
		o    Observation
		want flavor.Health
	}{
		{"listed, started and answering /health", Observation{Endpoints: []Endpoint{up(a, 1, true), up(b, 2, true), up(c, 3, true)}, Members: members}, flavor.HealthHealthy},
		{"its endpoint down while the cluster has a quorum", Observation{Endpoints: []Endpoint{up(a, 1, true), down(b), up(c, 3, true)}, Members: members}, flavor.HealthUnhealthy},
		{"answering but not /health", Observation{Endpoints: []Endpoint{up(a, 1, true), up(b, 2, false), up(c, 3, true)}, Members: members}, flavor.HealthUnhealthy},
		{"not listed", Observation{Endpoints: []Endpoint{up(a, 1, true), up(b, 7, true), up(c, 3, true)}, Members: []Member{started(1, a), started(3, c)}}, flavor.HealthUnhealthy},
		{"listed but never started", Observation{Endpoints: []Endpoint{up(a, 1, true), down(b), up(c, 3, true)},
			Members: []Member{started(1, a), {ID: 2, PeerURLs: []string{b.PeerURL}}, started(3, c)}}, flavor.HealthUnhealthy},
		{"a learner", Observation{Endpoints: []Endpoint{up(a, 1, true), {URL: b.ClientURL, Reached: true, ID: 2, Learner: true}, up(c, 3, true)},
			Members: []Member{started(1, a), {ID: 2, Name: b.Name, PeerURLs: []string{b.PeerURL}, ClientURLs: []string{b.ClientURL}, Learner: true}, started(3, c)}}, flavor.HealthUnknown},
		{"no quorum: unknown, not unhealthy", Observation{Endpoints: []Endpoint{down(a), up(b, 2, false), down(c)}, Members: members}, flavor.HealthUnknown},
		{"nothing answers", Observation{Endpoints: []Endpoint{down(a), down(b), down(c)}}, flavor.HealthUnknown},
	}
	for _, tt := range tests {
		if got := Verdict(tt.o, b); got != tt.want {
			t.Errorf("%s: Verdict = %s, want %s", tt.name, got, tt.want)
		}
	}
}

func TestDecideRemoval(t *testing.T) {
	p := pets("10.0.0.1", "10.0.0.2", "10.0.0.3")
	a, b, c := p[0], p[1], p[2]
	members := []Member{started(1, a), started(2, b), started(3, c)}
	healthyEndpoints := []Endpoint{up(a, 1, true), up(b, 2, true), up(c, 3, true)}
	tests := []struct {
		name    string
		o       Observation
		healthy map[uint64]bool
		want    []uint64
		wantErr string
	}{
		{"all healthy: removed", Observation{Endpoints: healthyEndpoints, Members: members}, map[uint64]bool{1: true, 2: true, 3: true}, []uint64{2}, ""},
		{"itself dead, the others healthy: removed", Observation{Endpoints: []Endpoint{up(a, 1, true), down(b), up(c, 3, true)}, Members: members}, map[uint64]bool{1: true, 3: true}, []uint64{2}, ""},
		{"another already dead: refused", Observation{Endpoints: []Endpoint{up(a, 1, true), up(b, 2, true), down(c)}, Members: members}, map[uint64]bool{1: true, 2: true}, nil, "fewer than the 2 a quorum needs"},
		{"no quorum: refused", Observation{Endpoints: []Endpoint{up(a, 1, false), up(b, 2, false), down(c)}, Members: members}, map[uint64]bool{}, nil, "refusing to remove"},
		{"not a member: nothing to do", Observation{Endpoints: healthyEndpoints, Members: []Member{started(1, a), started(3, c)}}, map[uint64]bool{1: true, 3: true}, nil, ""},
		{"the last member: nothing to do", Observation{Endpoints: []Endpoint{up(b, 2, true)}, Members: []Member{started(2, b)}}, map[uint64]bool{2: true}, nil, ""},
		{"nothing answers: nothing to do", Observation{Endpoints: []Endpoint{down(a), down(b), down(c)}}, nil, nil, ""},
	}
	for _, tt := range tests {
		got, err := DecideRemoval(tt.o, b, tt.healthy)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: DecideRemoval = %v, %v; want an error saying %q", tt.name, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tt.want) {
			t.Errorf("%s: DecideRemoval = %v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
}

// Whatever the cluster looks like, a removal DecideRemoval allows leaves
// at least a quorum of healthy voters, and a join never adds a pet while
// also keeping an unstarted entry of it.
func TestDecisionsKeepQuorum(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 7).Draw(t, "members")
		ids := make([]string, n)
		for i := range ids {
			ids[i] = "10.0.0." + string(rune('1'+i))
		}
		ps := pets(ids...)
		var o Observation
		healthy := map[uint64]bool{}
		for i, p := range ps {
			m := started(uint64(i+1), p)
			if rapid.Bool().Draw(t, "unstarted") {
				m.Name, m.ClientURLs = "", nil
			}
			if rapid.Bool().Draw(t, "listed") {
				o.Members = append(o.Members, m)
			}
			if rapid.Bool().Draw(t, "reached") {
				h := rapid.Bool().Draw(t, "healthy")
				o.Endpoints = append(o.Endpoints, up(p, m.ID, h))
				healthy[m.ID] = h
			} else {
				o.Endpoints = append(o.Endpoints, down(p))
			}
		}
		self := ps[rapid.IntRange(0, n-1).Draw(t, "self")]
		remove, err := DecideRemoval(o, self, healthy)
		if err == nil && len(remove) > 0 {
			voters, ok := 0, 0
			for _, m := range o.Members {
				if !slices.Contains(remove, m.ID) {
					voters++
					if healthy[m.ID] {
						ok++
					}
				}
			}
			if ok < voters/2+1 {
				t.Fatalf("removal of %v leaves %d healthy of %d voters", remove, ok, voters)
			}
		}
		j, err := DecideJoin(o, self, ps)
		if err == nil && j.State == "existing" {
			if !strings.Contains(j.InitialCluster, self.Name+"="+self.PeerURL) {
				t.Fatalf("join %+v: the initial cluster lacks the pet itself", j)
			}
			if strings.Count(j.InitialCluster, self.PeerURL) != 1 {
				t.Fatalf("join %+v: the pet is in the initial cluster more than once", j)
			}
		}
	})
}

func TestCheckAllocation(t *testing.T) {
	ids := func(s ...string) []instance.LogicalID {
		out := make([]instance.LogicalID, len(s))
		for i, x := range s {
			out[i] = instance.LogicalID(x)
		}
		return out
	}
	if ds := CheckAllocation(flavor.Allocation{LogicalIDs: ids("10.0.0.1", "etcd-2.example.com", "fd00::3")}); len(ds) != 0 {
		t.Errorf("three good logical IDs: %v", ds)
	}
	ds := CheckAllocation(flavor.Allocation{LogicalIDs: ids("10.0.0.1", "db_2", "a,b", "10.0.0.4")})
	var paths []string
	warned := false
	for _, d := range ds {
		if d.Severity == provider.Error {
			paths = append(paths, strings.Join(d.Path, "."))
		} else if d.Summary == "Even number of etcd members" {
			warned = true
		}
	}
	if !slices.Equal(paths, []string{"<allocation>.logical_ids.1", "<allocation>.logical_ids.2"}) || !warned {
		t.Errorf("CheckAllocation = %v; want errors at logical IDs 1 and 2 and an even-number warning", ds)
	}
	if ds := CheckAllocation(flavor.Allocation{Size: 3}); !ds.HasErrors() {
		t.Errorf("cattle: %v; want an error", ds)
	}
}
