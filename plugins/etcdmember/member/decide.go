package member

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/infrakit/infrakit/sdk/flavor"
)

// Observation is what one look at the cluster saw: each endpoint asked,
// and the member list one of them answered (nil when none did).
type Observation struct {
	Endpoints []Endpoint
	Members   []Member
}

// Endpoint is one client URL asked for its status and health.
type Endpoint struct {
	URL string
	// Reached is whether it answered its status.
	Reached bool
	// ID is the member that answered; Learner whether it is a learner.
	ID      uint64
	Learner bool
	// Leader is the leader it knows of (0: none).
	Leader uint64
	// Healthy is whether its /health answered true: the member has a
	// leader and a quorum read through it succeeded.
	Healthy bool
}

// Member is one entry of the cluster's member list.
type Member struct {
	ID         uint64
	Name       string
	PeerURLs   []string
	ClientURLs []string
	Learner    bool
}

// Started reports whether the member has ever run: it has published its
// name and client URLs. A member added but never started has neither; one
// of the initial cluster that never started has a name but no client URLs.
func (m Member) Started() bool { return m.Name != "" && len(m.ClientURLs) > 0 }

// Quorum reports whether the cluster has a quorum, as far as seen: some
// member answered /health, which etcd answers true only after a read that
// needed a quorum.
func (o Observation) Quorum() bool {
	return slices.ContainsFunc(o.Endpoints, func(e Endpoint) bool { return e.Healthy })
}

// Reached reports whether any endpoint answered.
func (o Observation) Reached() bool {
	return slices.ContainsFunc(o.Endpoints, func(e Endpoint) bool { return e.Reached })
}

// endpoint is what was seen at url.
func (o Observation) endpoint(url string) (Endpoint, bool) {
	i := slices.IndexFunc(o.Endpoints, func(e Endpoint) bool { return e.URL == url })
	if i < 0 {
		return Endpoint{}, false
	}
	return o.Endpoints[i], true
}

// is reports whether m stands for pet (by peer URL, or by name).
func (m Member) is(pet Pet) bool {
	return slices.Contains(m.PeerURLs, pet.PeerURL) || (m.Name != "" && m.Name == pet.Name)
}

// summary says how many members answer, for messages.
func (o Observation) summary() string {
	healthy, reached := 0, 0
	for _, e := range o.Endpoints {
		if e.Reached {
			reached++
		}
		if e.Healthy {
			healthy++
		}
	}
	return fmt.Sprintf("%d of %d endpoints answer, %d healthy", reached, len(o.Endpoints), healthy)
}

// ErrNoQuorum is wrapped by DecideJoin's refusal when members answer but
// none has a quorum.
var ErrNoQuorum = errors.New("the cluster has no quorum")

// Join is how a new instance of a pet joins: with what initial-cluster and
// state, after which changes to the member list.
type Join struct {
	// State is etcd's initial-cluster-state: "new" or "existing".
	State string
	// Remove are members to remove first: earlier incarnations of this pet
	// that ran and are gone (the group destroys a pet before it makes its
	// replacement), whose votes must not count any more.
	Remove []uint64
	// Add is whether the pet must be added (MemberAdd) before it starts.
	Add bool
	// InitialCluster is etcd's initial-cluster: name=peerURL, comma-joined.
	InitialCluster string
}

// DecideJoin decides how self joins, from an observation of the pets'
// endpoints (pets includes self):
//
//   - no member answers: the cluster is formed anew from every pet (the
//     first formation, or re-formation once every member is gone);
//   - the member list holds self never started: named (a member of the
//     initial cluster) it bootstraps "new" with the listed members, as the
//     others did; unnamed (an earlier Prepare added it) it joins
//     "existing" as it is;
//   - the cluster has a quorum: earlier incarnations of self are removed,
//     self is added, and it joins the existing cluster;
//   - members answer without a quorum: it refuses, since neither removing
//     nor adding a member can be agreed; a person must act.
func DecideJoin(o Observation, self Pet, pets []Pet) (Join, error) {
	if !o.Reached() {
		names := make([]string, len(pets))
		for i, p := range pets {
			names[i] = p.Name + "=" + p.PeerURL
		}
		return Join{State: "new", InitialCluster: strings.Join(names, ",")}, nil
	}
	if o.Members == nil {
		return Join{}, fmt.Errorf("member %s cannot join: no member listed the cluster's members (%s)", self.Name, o.summary())
	}
	var j Join
	kept, initial := false, false
	for _, m := range o.Members {
		switch {
		case !m.is(self):
		case !m.Started() && slices.Contains(m.PeerURLs, self.PeerURL):
			// A member of the initial cluster has its name from the
			// start; one added since has none until it runs.
			kept, initial = true, m.Name != ""
		default:
			j.Remove = append(j.Remove, m.ID)
		}
	}
	if kept && initial && len(j.Remove) == 0 {
		// A member of the initial cluster that never started (the
		// cluster formed, or is forming, without it yet): it bootstraps
		// with the configuration the others started with, as etcd's
		// initial members all do.
		return Join{State: "new", InitialCluster: InitialCluster(o.Members, pets)}, nil
	}
	if !o.Quorum() && (!kept || len(j.Remove) > 0) {
		return Join{}, fmt.Errorf("member %s cannot join: %w (%s), so no member can be removed or added; "+
			"nothing is replaced until a majority of the members is back, or a person restores the cluster (see the etcdmember flavor's documentation)", self.Name, ErrNoQuorum, o.summary())
	}
	j.Add = !kept
	j.State = "existing"
	members := slices.DeleteFunc(slices.Clone(o.Members), func(m Member) bool { return slices.Contains(j.Remove, m.ID) })
	if j.Add {
		members = append(members, Member{PeerURLs: []string{self.PeerURL}})
	}
	j.InitialCluster = InitialCluster(members, pets)
	return j, nil
}

// InitialCluster is etcd's initial-cluster for joining a cluster whose
// members are members: each one's name=peerURL entries. A member joining
// "existing" must name exactly the peer URLs of the member list, so after
// changing the list Prepare builds it again from a fresh one. The entries
// are sorted: etcd takes them in any order, and the member list comes in
// the order of the members' random IDs, so sorting makes the same cluster
// give the same value (and the same init script) every time.
func InitialCluster(members []Member, pets []Pet) string {
	var entries []string
	for _, m := range members {
		entries = append(entries, initialEntries(m, pets)...)
	}
	slices.Sort(entries)
	return strings.Join(entries, ",")
}

// initialEntries are m's name=peerURL entries of an initial-cluster: the
// pet's name when a pet has its peer URL (a member added but not started
// has no name yet), else its own, else one made from its ID.
func initialEntries(m Member, pets []Pet) []string {
	var out []string
	for _, u := range m.PeerURLs {
		name := m.Name
		if i := slices.IndexFunc(pets, func(p Pet) bool { return p.PeerURL == u }); i >= 0 {
			name = pets[i].Name
		}
		if name == "" {
			name = fmt.Sprintf("m%x", m.ID)
		}
		out = append(out, name+"="+u)
	}
	return out
}

// Verdict is the health of the instance of pet in o:
//
//   - unknown while the cluster has no quorum as far as seen (a partition
//     alone must never replace members), and for a learner, which is on
//     its way to being a voter;
//   - healthy when it is in the member list, started, and its endpoint
//     answers /health;
//   - unhealthy otherwise.
func Verdict(o Observation, pet Pet) flavor.Health {
	if !o.Quorum() || o.Members == nil {
		return flavor.HealthUnknown
	}
	i := slices.IndexFunc(o.Members, func(m Member) bool { return m.is(pet) })
	if i < 0 {
		return flavor.HealthUnhealthy
	}
	m := o.Members[i]
	e, _ := o.endpoint(pet.ClientURL)
	switch {
	case m.Learner || e.Learner:
		return flavor.HealthUnknown
	case !m.Started() || !e.Reached || !e.Healthy || e.ID != m.ID:
		return flavor.HealthUnhealthy
	}
	return flavor.HealthHealthy
}

// DecideRemoval decides the drain of pet: the member IDs to remove (none
// when it is not a member, or is the cluster's last), or an error when the
// removal would leave the cluster without a quorum. healthy says which
// members answer /health (by member ID).
func DecideRemoval(o Observation, pet Pet, healthy map[uint64]bool) ([]uint64, error) {
	if !o.Reached() {
		return nil, nil // nothing answers: there is no cluster to keep a vote in
	}
	if o.Members == nil {
		return nil, fmt.Errorf("cannot remove member %s: no member listed the cluster's members (%s)", pet.Name, o.summary())
	}
	var remove []uint64
	for _, m := range o.Members {
		if m.is(pet) {
			remove = append(remove, m.ID)
		}
	}
	if len(remove) == 0 || len(remove) == len(o.Members) {
		return nil, nil // not a member, or the last: nothing to keep it from
	}
	voters, up := 0, 0
	for _, m := range o.Members {
		if m.Learner || slices.Contains(remove, m.ID) {
			continue
		}
		voters++
		if healthy[m.ID] {
			up++
		}
	}
	if quorum := voters/2 + 1; up < quorum || !o.Quorum() {
		return nil, fmt.Errorf("refusing to remove member %s: %d of the %d members left would be healthy, fewer than the %d a quorum needs, and the cluster would stop; "+
			"bring members back to health first", pet.Name, up, voters, quorum)
	}
	return remove, nil
}

// Transfer decides whether leadership must move before the members remove
// are removed: when one of them leads, to a healthy voter that stays. ok
// is false when no move is needed (or none is possible: the removal then
// makes the cluster elect a new leader itself). from is the leader's
// client URL, where the request must go.
func Transfer(o Observation, remove []uint64) (from string, to uint64, ok bool) {
	for _, e := range o.Endpoints {
		if !e.Reached || e.ID == 0 || e.ID != e.Leader || !slices.Contains(remove, e.ID) {
			continue
		}
		for _, c := range o.Endpoints {
			if c.Healthy && !c.Learner && c.ID != 0 && !slices.Contains(remove, c.ID) {
				return e.URL, c.ID, true
			}
		}
	}
	return "", 0, false
}
