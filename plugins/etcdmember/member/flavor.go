// Package member implements the "etcdmember" flavor: the members of a group
// of pets are the members of one etcd cluster, each named and reached by
// its logical ID (an IP address or host name), and the flavor keeps the
// cluster's member list equal to the group through etcd's official client
// (go.etcd.io/etcd/client/v3).
//
//   - Prepare hands an instance the configuration to join as its init
//     script, lines `export ETCD_NAME='...'` (see InitScript): name, peer
//     and client URLs, initial-cluster and its state. The docker provider
//     passes it to the container as INFRAKIT_INIT. A first formation is "new" with every
//     pet; a replacement first removes the earlier incarnation of its pet
//     that is still listed and adds itself (MemberAdd), then starts
//     "existing". An instance already added but never started is not added
//     twice. With members answering but no quorum it refuses (DecideJoin).
//   - Healthy is healthy when the member is listed, started, answers
//     /health and is no learner; unknown while the cluster has no quorum,
//     so a partition alone never replaces a member (Verdict).
//   - Drain removes the member (MemberRemove), and refuses when that would
//     leave the cluster without a quorum (DecideRemoval).
//   - Validate warns of an even number of members and reports a logical ID
//     that cannot be a member's address at that logical ID.
//
// The flavor keeps no state: the cluster is found from the instances'
// logical IDs, the peers tag Prepare adds, and the member list.
package member

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/flavor"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Name is the provider's name; Type is the flavor type it serves.
const (
	Name = "etcdmember"
	Type = "etcdmember"
)

// TagPeers is the tag Prepare puts on each instance: the logical IDs of the
// group when it was made, comma-separated, where Healthy and Drain look for
// the cluster besides the instance itself.
const TagPeers = "etcdmember.peers"

// Metadata describes the etcdmember provider.
func Metadata(version string) provider.Metadata {
	return provider.Metadata{
		Name:    Name,
		Version: version,
		Objects: []provider.Object{{Kind: provider.KindFlavor, Type: Type, Schema: Schema()}},
	}
}

// Flavor is the etcdmember flavor. It keeps nothing between calls and
// starts no goroutines beyond those of one call.
type Flavor struct {
	logger hclog.Logger
	// reconfig makes the membership changes of this process one at a
	// time: each decides from a look at the cluster taken after the one
	// before it finished, so members drained at once (a group destroyed,
	// a scale-down) never remove each other on a stale view.
	reconfig sync.Mutex
}

var (
	_ flavor.Plugin             = (*Flavor)(nil)
	_ flavor.BatchHealthChecker = (*Flavor)(nil)
)

// New returns a Flavor; logger may be nil.
func New(logger hclog.Logger) *Flavor {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	return &Flavor{logger: logger}
}

// Validate checks the properties and the allocation (see CheckAllocation):
// warnings alone come back as provider.Diagnostics too.
func (f *Flavor) Validate(ctx context.Context, properties json.RawMessage, allocation flavor.Allocation) error {
	_, err := Parse(properties)
	if err != nil {
		return err
	}
	if ds := CheckAllocation(allocation); len(ds) > 0 {
		return ds
	}
	return nil
}

// changeMembers removes earlier incarnations of self and adds it, as j
// says, and returns the member list afterwards.
func (f *Flavor) changeMembers(ctx context.Context, c *cluster, o Observation, j Join, self Pet) ([]Member, error) {
	if len(j.Remove) > 0 {
		f.logger.Info("removing an earlier incarnation of the member", "member", self.Name, "ids", hexIDs(j.Remove))
		if err := c.Remove(ctx, o, j.Remove); err != nil {
			return nil, fmt.Errorf("member %s: %w", self.Name, err)
		}
	}
	// members is the list as the add left it: the leader's answer, which
	// a follower asked next may not know yet (under load it did not).
	var members []Member
	var err error
	if j.Add {
		f.logger.Info("adding the member", "member", self.Name, "peer_url", self.PeerURL)
		if members, err = c.Add(ctx, o, self.PeerURL); err != nil {
			return nil, fmt.Errorf("member %s: %w", self.Name, err)
		}
	}
	if members == nil {
		// Others may have joined meanwhile (pets added at once): the
		// initial cluster is the list as it is now.
		if members, err = c.Members(ctx, o); err != nil {
			return nil, fmt.Errorf("member %s: %w", self.Name, err)
		}
	}
	if !slices.ContainsFunc(members, func(m Member) bool { return slices.Contains(m.PeerURLs, self.PeerURL) }) {
		return nil, fmt.Errorf("member %s: added, but the member list does not show it yet; it is prepared again", self.Name)
	}
	return members, nil
}

// Prepare decides how the instance joins (DecideJoin), changes the member
// list as that says, and returns spec with the ETCD_* variables in the env
// map of its properties and the peers tag.
func (f *Flavor) Prepare(ctx context.Context, properties json.RawMessage, spec instance.Spec, allocation flavor.Allocation, index flavor.Index) (instance.Spec, error) {
	p, err := Parse(properties)
	if err != nil {
		return spec, err
	}
	if err := CheckAllocation(allocation).Err(); err != nil {
		return spec, err
	}
	if spec.LogicalID == nil {
		return spec, fmt.Errorf("the etcdmember flavor prepares pets only: the instance has no logical ID")
	}
	self := p.PetOf(*spec.LogicalID)
	pets := make([]Pet, len(allocation.LogicalIDs))
	urls := make([]string, len(pets))
	for i, id := range allocation.LogicalIDs {
		pets[i] = p.PetOf(id)
		urls[i] = pets[i].ClientURL
	}
	if !slices.Contains(pets, self) {
		return spec, fmt.Errorf("logical ID %q is not among the group's logical IDs", *spec.LogicalID)
	}
	c := newCluster(p.Timeout)
	f.reconfig.Lock()
	defer f.reconfig.Unlock()
	o, j, err := f.decideJoin(ctx, c, urls, self, pets)
	if err != nil {
		return spec, err
	}
	if len(j.Remove) > 0 || j.Add {
		members, err := f.changeMembers(ctx, c, o, j, self)
		if err != nil {
			return spec, err
		}
		j.InitialCluster = InitialCluster(members, pets)
	}
	token := p.Token
	if token == "" {
		token = TokenPrefix + index.Group
	}
	spec.Init = joinInit(spec.Init, InitScript(map[string]string{
		"ETCD_NAME":                        self.Name,
		"ETCD_INITIAL_ADVERTISE_PEER_URLS": self.PeerURL,
		"ETCD_ADVERTISE_CLIENT_URLS":       self.ClientURL,
		"ETCD_LISTEN_PEER_URLS":            "http://0.0.0.0:" + strconv.Itoa(p.PeerPort),
		"ETCD_LISTEN_CLIENT_URLS":          "http://0.0.0.0:" + strconv.Itoa(p.ClientPort),
		"ETCD_INITIAL_CLUSTER":             j.InitialCluster,
		"ETCD_INITIAL_CLUSTER_STATE":       j.State,
		"ETCD_INITIAL_CLUSTER_TOKEN":       token,
	}))
	ids := make([]string, len(allocation.LogicalIDs))
	for i, id := range allocation.LogicalIDs {
		ids[i] = string(id)
	}
	tags := make(map[string]string, len(spec.Tags)+1)
	for k, v := range spec.Tags {
		tags[k] = v
	}
	tags[TagPeers] = strings.Join(ids, ",")
	spec.Tags = tags
	f.logger.Debug("prepared", "member", self.Name, "state", j.State, "initial_cluster", j.InitialCluster)
	return spec, nil
}

// settleFor is how long Prepare looks again at a cluster whose members
// answer without a quorum: a leader that was just killed leaves the others
// without one until they elect another, an election timeout or two.
const settleFor = 5 * time.Second

// decideJoin observes the cluster at urls and decides how self joins
// (DecideJoin), looking again every reconfigureEvery for up to settleFor
// while the decision is a refusal for want of a quorum.
func (f *Flavor) decideJoin(ctx context.Context, c *cluster, urls []string, self Pet, pets []Pet) (Observation, Join, error) {
	deadline := time.Now().Add(settleFor)
	for {
		// The pet's own endpoint is not asked: its instance is yet to be
		// made (an earlier one is gone), and a gone address costs the
		// whole timeout.
		o, err := c.Observe(ctx, urls, self.ClientURL)
		if err != nil {
			return o, Join{}, err
		}
		j, err := DecideJoin(o, self, pets)
		if err == nil || !errors.Is(err, ErrNoQuorum) || time.Now().After(deadline) {
			return o, j, err
		}
		select {
		case <-ctx.Done():
			return o, j, err
		case <-time.After(reconfigureEvery):
		}
	}
}

// joinInit appends script to the init lines spec already has.
func joinInit(init, script string) string {
	if init == "" {
		return script
	}
	return strings.TrimSuffix(init, "\n") + "\n" + script
}

// InitScript is the init script that configures a member: one
// `export NAME='value'` line per variable, sorted, so a shell can run it
// before etcd and testdata/etcd-cluster's launcher can read it without
// one. The values never hold a single quote (logical IDs, URLs and
// cluster tokens cannot).
func InitScript(env map[string]string) string {
	var b strings.Builder
	for _, k := range slices.Sorted(maps.Keys(env)) {
		fmt.Fprintf(&b, "export %s='%s'\n", k, env[k])
	}
	return b.String()
}

// Healthy judges one instance (see Verdict).
func (f *Flavor) Healthy(ctx context.Context, properties json.RawMessage, inst instance.Description) (flavor.Health, error) {
	hs, err := f.HealthyAll(ctx, properties, []instance.Description{inst})
	if err != nil {
		return flavor.HealthUnknown, err
	}
	return hs[0], nil
}

// HealthyAll judges a group's instances from one observation of their
// cluster (see Verdict). An instance that is not running, or has no
// logical ID, is unknown.
func (f *Flavor) HealthyAll(ctx context.Context, properties json.RawMessage, insts []instance.Description) ([]flavor.Health, error) {
	p, err := Parse(properties)
	if err != nil {
		return nil, err
	}
	out := make([]flavor.Health, len(insts))
	for i := range out {
		out[i] = flavor.HealthUnknown
	}
	urls := f.endpoints(p, insts)
	if len(urls) == 0 {
		return out, nil
	}
	o, err := newCluster(p.Timeout).Observe(ctx, urls)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	for i, inst := range insts {
		if inst.LogicalID == nil || (inst.State != "" && inst.State != instance.StateRunning) {
			continue
		}
		out[i] = Verdict(o, p.PetOf(*inst.LogicalID))
	}
	return out, nil
}

// Drain removes the instance's member from the cluster, unless that would
// leave the cluster without a quorum (see DecideRemoval). A removal that
// fails is decided again from a fresh look, for up to reconfigureFor:
// members drained at once (a group destroyed) remove each other, and the
// one asked may be gone by then.
func (f *Flavor) Drain(ctx context.Context, properties json.RawMessage, inst instance.Description) error {
	p, err := Parse(properties)
	if err != nil {
		return err
	}
	if inst.LogicalID == nil {
		return nil // not a member this flavor made
	}
	pet := p.PetOf(*inst.LogicalID)
	c := newCluster(p.Timeout)
	urls := f.endpoints(p, []instance.Description{inst})
	f.reconfig.Lock()
	defer f.reconfig.Unlock()
	deadline := time.Now().Add(reconfigureFor)
	for {
		done, err := f.removeOnce(ctx, c, urls, pet)
		if done || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		f.logger.Debug("removing the member failed; deciding again", "member", pet.Name, "error", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(reconfigureEvery):
		}
	}
}

// removeOnce looks at the cluster, decides and removes pet's member; done
// is false when the removal failed and may be decided again.
func (f *Flavor) removeOnce(ctx context.Context, c *cluster, urls []string, pet Pet) (done bool, err error) {
	o, err := c.Observe(ctx, urls)
	if err != nil {
		return false, err
	}
	healthy := map[uint64]bool{}
	for _, e := range o.Endpoints {
		if e.Healthy {
			healthy[e.ID] = true
		}
	}
	remove, err := DecideRemoval(o, pet, healthy)
	if err != nil || len(remove) == 0 {
		return true, err
	}
	// A leader that is removed leaves the cluster without one until an
	// election timeout passes; handing leadership over first makes that
	// a heartbeat or two.
	if from, to, ok := Transfer(o, remove); ok {
		if err := c.MoveLeader(ctx, from, to); err != nil {
			f.logger.Warn("could not hand leadership over before removing the leader; the cluster elects a new one", "member", pet.Name, "error", err)
		}
	}
	f.logger.Info("removing the member before its instance is destroyed", "member", pet.Name, "ids", hexIDs(remove))
	if err := c.Remove(ctx, o, remove); err != nil {
		return false, fmt.Errorf("member %s: %w", pet.Name, err)
	}
	return true, nil
}

// endpoints are the client URLs to find the cluster of insts through:
// theirs and their peers tag's (the member list names the rest).
func (f *Flavor) endpoints(p Properties, insts []instance.Description) []string {
	var ids []instance.LogicalID
	add := func(id instance.LogicalID) {
		if id != "" && CheckLogicalID(string(id)) == "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, inst := range insts {
		if inst.LogicalID != nil {
			add(*inst.LogicalID)
		}
		for _, s := range strings.Split(inst.Tags[TagPeers], ",") {
			add(instance.LogicalID(s))
		}
	}
	urls := make([]string, len(ids))
	for i, id := range ids {
		urls[i] = p.PetOf(id).ClientURL
	}
	return urls
}

func hexIDs(ids []uint64) []string {
	out := make([]string, len(ids))
	for i, id := range ids {
		out[i] = strconv.FormatUint(id, 16)
	}
	return out
}
