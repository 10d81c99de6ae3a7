package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/infrakit/infrakit/plugins/simulator/store"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
)

// authRecord is the file of one NFS authorization.
type authRecord struct {
	ID         string            `json:"id"`
	SourceID   string            `json:"source_id"`
	Host       string            `json:"host,omitempty"`
	Volume     string            `json:"volume,omitempty"`
	Options    []string          `json:"options,omitempty"`
	Properties compactJSON       `json:"properties,omitempty"`
	Tags       map[string]string `json:"tags,omitempty"`
	CreatedAt  time.Time         `json:"created_at"`
}

// Authorizer is the simulated NFS authorizer of one type.
type Authorizer struct {
	sim        *Simulator
	collection string
	cache      *store.Cache[authRecord]
}

var _ nfs.Authorizer = (*Authorizer)(nil)

// Validate accepts any JSON object (or nothing).
func (a *Authorizer) Validate(ctx context.Context, properties json.RawMessage) error {
	return validateObject(properties)
}

// Describe lists the authorizations, sorted by ID, through the listing
// cache (see store.Cache): only files that changed are read again.
func (a *Authorizer) Describe(ctx context.Context) ([]nfs.Authorization, error) {
	objs, err := store.ListCached(ctx, a.sim.store, a.collection, a.cache)
	if err != nil {
		return nil, fmt.Errorf("describe authorizations: %w", err)
	}
	out := make([]nfs.Authorization, 0, len(objs))
	for _, o := range objs {
		r := o.Value
		// Options, properties and tags are the cache's record's, shared
		// read-only (nfs.Authorization), as describe shares an instance's.
		out = append(out, nfs.Authorization{
			ID:         o.Name, // the file name is the ID, as for instances
			SourceID:   instance.ID(r.SourceID),
			Host:       r.Host,
			Volume:     r.Volume,
			Options:    r.Options,
			Properties: r.Properties.raw(),
			Tags:       r.Tags,
		})
	}
	return out, nil
}

// Authorize records auth under a new ID ("auth-" and 8 hex digits).
func (a *Authorizer) Authorize(ctx context.Context, auth nfs.Authorization) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", err
	}
	if err := validateObject(auth.Properties); err != nil {
		return "", err
	}
	if auth.SourceID == "" {
		return "", errors.New("authorize: the authorization has no source instance ID")
	}
	rec := authRecord{
		SourceID:   string(auth.SourceID),
		Host:       auth.Host,
		Volume:     auth.Volume,
		Options:    auth.Options,
		Properties: compacted(auth.Properties),
		Tags:       maps.Clone(auth.Tags),
		CreatedAt:  a.sim.cfg.Now().UTC(),
	}
	for attempt := 0; ; attempt++ {
		id, err := newID("auth")
		if err != nil {
			return "", err
		}
		rec.ID = id
		err = store.CreateCached(a.sim.store, store.Key{Collection: a.collection, Name: id}, rec, a.cache)
		if errors.Is(err, store.ErrExists) && attempt < 10 {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("authorize %s: %w", auth.SourceID, err)
		}
		return id, nil
	}
}

// Revoke removes an authorization; a missing one is not an error.
func (a *Authorizer) Revoke(ctx context.Context, id string) error {
	if _, err := store.RemoveLocked(ctx, a.sim.store, store.Key{Collection: a.collection, Name: id}); err != nil {
		return fmt.Errorf("revoke %q: %w", id, err)
	}
	return nil
}
