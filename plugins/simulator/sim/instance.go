package sim

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"maps"
	"net/netip"
	"time"

	"github.com/infrakit/infrakit/plugins/simulator/store"
	"github.com/infrakit/infrakit/sdk/instance"
)

// instanceRecord is the file of one instance. Field names are what people
// edit, so they are stable: "health" and "state" in particular are the
// documented fault-injection fields.
type instanceRecord struct {
	ID          string                `json:"id"`
	Type        string                `json:"type"`
	LogicalID   *instance.LogicalID   `json:"logical_id,omitempty"`
	Tags        map[string]string     `json:"tags"`
	Properties  compactJSON           `json:"properties,omitempty"`
	Init        string                `json:"init,omitempty"`
	Attachments []instance.Attachment `json:"attachments,omitempty"`
	Address     string                `json:"address,omitempty"`
	CreatedAt   time.Time             `json:"created_at"`
	// PendingUntil is CreatedAt plus the provision delay of the process that
	// provisioned it, so every process agrees on when it starts running.
	PendingUntil *time.Time `json:"pending_until,omitempty"`
	// State, when written by hand, overrides the computed state.
	State instance.State `json:"state,omitempty"`
	// Health is read by the simulator flavor: healthy (or empty), unhealthy, unknown.
	Health string `json:"health,omitempty"`
}

func instanceCollection(typ string) string { return "instances/" + typ }

// Instances is the instance plugin for one type. It implements
// instance.Plugin and instance.Watcher.
type Instances struct {
	sim        *Simulator
	typ        string
	collection string
	cache      *store.Cache[instanceRecord]
}

var (
	_ instance.Plugin  = (*Instances)(nil)
	_ instance.Watcher = (*Instances)(nil)

	_ instance.DescribingProvisioner = (*Instances)(nil)
)

// Validate accepts any JSON object (or nothing): properties are free-form and
// stored as given.
func (p *Instances) Validate(ctx context.Context, properties json.RawMessage) error {
	return validateObject(properties)
}

// Provision writes a new instance file and returns its ID. The instance is
// pending for the provision delay, then running.
func (p *Instances) Provision(ctx context.Context, spec instance.Spec) (instance.ID, error) {
	d, err := p.ProvisionDescribed(ctx, spec)
	return d.ID, err
}

// ProvisionDescribed is Provision answering with the instance as a listing
// right after would describe it (running at once without a provision delay),
// properties included.
func (p *Instances) ProvisionDescribed(ctx context.Context, spec instance.Spec) (instance.Description, error) {
	if err := ctx.Err(); err != nil {
		return instance.Description{}, err
	}
	if err := validateObject(spec.Properties); err != nil {
		return instance.Description{}, err
	}
	cfg := p.sim.cfg
	if cfg.FailureRate > 0 && cfg.Rand() < cfg.FailureRate {
		return instance.Description{}, fmt.Errorf("simulated provision failure of a %s instance (%s=%g)", p.typ, EnvFailureRate, cfg.FailureRate)
	}
	now := cfg.Now().UTC()
	rec := instanceRecord{
		Type:        p.typ,
		LogicalID:   spec.LogicalID,
		Tags:        maps.Clone(spec.Tags),
		Properties:  compacted(spec.Properties),
		Init:        spec.Init,
		Attachments: spec.Attachments,
		CreatedAt:   now,
	}
	if rec.Tags == nil {
		rec.Tags = map[string]string{}
	}
	if cfg.ProvisionDelay > 0 {
		until := now.Add(cfg.ProvisionDelay)
		rec.PendingUntil = &until
	}
	if cfg.Capacity > 0 {
		// Counting and creating must be one step across processes, or two
		// of them could both take the last slot.
		unlock, err := p.sim.store.Lock(ctx, store.Key{Collection: p.collection, Name: ".capacity"})
		if err != nil {
			return instance.Description{}, err
		}
		defer unlock()
		names, err := p.sim.store.Names(p.collection)
		if err != nil {
			return instance.Description{}, err
		}
		if len(names) >= cfg.Capacity {
			return instance.Description{}, fmt.Errorf("out of capacity: %d of %d %s instances exist (%s)", len(names), cfg.Capacity, p.typ, EnvCapacity)
		}
	}
	// IDs are random; Create never replaces, so a collision (with another
	// process, or a file written by hand) just draws again.
	for attempt := 0; ; attempt++ {
		id, err := newID(p.typ)
		if err != nil {
			return instance.Description{}, err
		}
		rec.ID = id
		rec.Address = address(instance.ID(id), spec.LogicalID)
		err = store.CreateCached(p.sim.store, store.Key{Collection: p.collection, Name: id}, rec, p.cache)
		if errors.Is(err, store.ErrExists) && attempt < 10 {
			continue
		}
		if err != nil {
			return instance.Description{}, fmt.Errorf("provision %s instance: %w", p.typ, err)
		}
		return describe(id, rec, now, true), nil
	}
}

// Label merges tags into an instance's tags.
func (p *Instances) Label(ctx context.Context, id instance.ID, tags map[string]string) error {
	key := store.Key{Collection: p.collection, Name: string(id)}
	return store.Update(ctx, p.sim.store, key, func(rec *instanceRecord, found bool) error {
		if !found {
			return fmt.Errorf("label: %s instance %q: %w", p.typ, id, store.ErrNotFound)
		}
		if rec.Tags == nil {
			rec.Tags = map[string]string{}
		}
		maps.Copy(rec.Tags, tags)
		return nil
	})
}

// Destroy removes the instance's file; a missing one is not an error.
func (p *Instances) Destroy(ctx context.Context, id instance.ID, reason instance.DestroyReason) error {
	existed, err := store.RemoveLocked(ctx, p.sim.store, store.Key{Collection: p.collection, Name: string(id)})
	if err != nil {
		return fmt.Errorf("destroy %s instance %q: %w", p.typ, id, err)
	}
	p.sim.cfg.Logger.Debug("destroyed instance", "type", p.typ, "id", id, "reason", reason, "existed", existed)
	return nil
}

// DescribeInstances lists the instances of this type carrying every tag,
// sorted by ID. Corrupt files are skipped (with a logged warning). Files
// unchanged since the last listing in this process are not re-read (see
// store.Cache: while it follows the directory with inotify, they are not
// even stat'ed).
func (p *Instances) DescribeInstances(ctx context.Context, tags map[string]string, withProperties bool) ([]instance.Description, error) {
	if err := sleep(ctx, p.sim.cfg.DescribeDelay); err != nil {
		return nil, err
	}
	objs, err := store.ListCached(ctx, p.sim.store, p.collection, p.cache)
	if err != nil {
		return nil, fmt.Errorf("describe %s instances: %w", p.typ, err)
	}
	now := p.sim.cfg.Now()
	out := make([]instance.Description, 0, len(objs))
	for _, o := range objs {
		if !hasTags(o.Value.Tags, tags) {
			continue
		}
		out = append(out, describe(o.Name, o.Value, now, withProperties))
	}
	return out, nil
}

// describe turns a file into a Description; the file name is the ID, so a
// copied file is a distinct instance. rec may be shared with the listing
// cache: the Description shares its tags, read-only as description tags
// are everywhere (copying them cost a map per instance per listing, most of
// what listing 10,000 cost beyond the RPC), and gets its own logical ID.
func describe(name string, rec instanceRecord, now time.Time, withProperties bool) instance.Description {
	d := instance.Description{
		ID:      instance.ID(name),
		Tags:    rec.Tags,
		Address: rec.Address,
		State:   stateOf(rec, now),
	}
	if rec.LogicalID != nil {
		l := *rec.LogicalID
		d.LogicalID = &l
	}
	if d.Tags == nil {
		d.Tags = map[string]string{}
	}
	if d.Address == "" {
		d.Address = address(d.ID, rec.LogicalID)
	}
	if withProperties {
		d.Properties = rec.Properties.raw()
	}
	return d
}

// stateOf is the instance's state at now: a valid hand-written state wins,
// otherwise pending until PendingUntil, then running.
func stateOf(rec instanceRecord, now time.Time) instance.State {
	switch rec.State {
	case instance.StatePending, instance.StateRunning, instance.StateTerminating:
		return rec.State
	}
	if rec.PendingUntil != nil && now.Before(*rec.PendingUntil) {
		return instance.StatePending
	}
	return instance.StateRunning
}

// address is the logical ID when that is an IP (pets are often named by
// their address), else 10.A.B.C from the low 24 bits of FNV-1a of the ID.
func address(id instance.ID, logical *instance.LogicalID) string {
	if logical != nil {
		if ip, err := netip.ParseAddr(string(*logical)); err == nil {
			return ip.String()
		}
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	v := h.Sum32()
	return fmt.Sprintf("10.%d.%d.%d", byte(v>>16), byte(v>>8), byte(v))
}

func hasTags(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// newID is prefix-<8 random hex digits>.
func newID(prefix string) (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("random ID: %w", err)
	}
	return prefix + "-" + hex.EncodeToString(b[:]), nil
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
