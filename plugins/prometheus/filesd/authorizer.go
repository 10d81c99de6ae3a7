// Package filesd is the "file_sd" NFS authorizer of the prometheus
// provider: it keeps Prometheus file_sd target files equal to its
// authorizations, so an enrollment keeps a scrape job's targets equal to a
// group's members. Each authorization is one target group: the member's
// address as the target, the properties' labels plus infrakit_instance
// (and a pet's infrakit_logical_id), and a hidden label
// (__infrakit_authorization) recording the authorization as JSON, which
// Prometheus drops after relabeling. The files are the state: Describe
// reads the authorizations back from them, so removing a file makes the
// next enrollment pass write it again.
//
// Describe has no properties to find the files by, so the provider keeps
// a registry of the files it writes (files.json in its directory,
// $INFRAKIT_PROMETHEUS_DIR, default .infrakit/prometheus in the working
// directory). Every change holds the directory's flock (the CLI's and
// watch's provider processes share it) and replaces files atomically, so
// Prometheus and other readers see the old file or the new one.
package filesd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/properties"
)

// Type is the authorizer type.
const Type = "file_sd"

// EnvDir names the provider's directory; DefaultDir is the one without it.
const (
	EnvDir     = "INFRAKIT_PROMETHEUS_DIR"
	DefaultDir = ".infrakit/prometheus"
)

// Config configures an Authorizer; zero values take the defaults.
type Config struct {
	// Dir holds the registry (files.json) and its lock; relative to the
	// working directory.
	Dir    string
	Logger hclog.Logger
}

// ConfigFromEnv reads a Config from the environment.
func ConfigFromEnv(getenv func(string) string) Config {
	return Config{Dir: getenv(EnvDir)}
}

// Authorizer is the "file_sd" authorizer.
type Authorizer struct {
	cfg Config
	mu  sync.Mutex // one change at a time in this process; the flock covers others
}

var _ nfs.Authorizer = (*Authorizer)(nil)

// New resolves cfg's directory; nothing is written until the first change.
func New(cfg Config) (*Authorizer, error) {
	if cfg.Dir == "" {
		cfg.Dir = DefaultDir
	}
	dir, err := filepath.Abs(cfg.Dir)
	if err != nil {
		return nil, fmt.Errorf("%s %q: %w", EnvDir, cfg.Dir, err)
	}
	cfg.Dir = dir
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	return &Authorizer{cfg: cfg}, nil
}

// Dir is the provider's directory, absolute.
func (a *Authorizer) Dir() string { return a.cfg.Dir }

func (a *Authorizer) registryFile() string { return filepath.Join(a.cfg.Dir, "files.json") }

// Validate checks an enrollment target's properties.
func (a *Authorizer) Validate(ctx context.Context, props json.RawMessage) error {
	_, err := ParseProperties(props)
	return err
}

// Describe lists the authorizations the registered files hold, by ID.
func (a *Authorizer) Describe(ctx context.Context) ([]nfs.Authorization, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// No lock: files are replaced atomically, so each read sees a whole one.
	reg, err := readRegistry(a.registryFile())
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	var out []nfs.Authorization
	for _, f := range reg.Files {
		entries, _, err := readFile(f)
		if err != nil {
			return nil, fmt.Errorf("describe: %w", err)
		}
		for _, e := range entries {
			out = append(out, e.Authorization())
		}
	}
	slices.SortFunc(out, func(x, y nfs.Authorization) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Authorize lists auth's member in the file its properties name and
// returns the authorization's ID ("sd-" and 8 hex digits). Authorizing
// the same authorization again (member, properties, tags) returns the
// ID it has: a retried call never lists a member twice.
func (a *Authorizer) Authorize(ctx context.Context, auth nfs.Authorization) (string, error) {
	props, err := ParseProperties(auth.Properties)
	if err != nil {
		return "", err
	}
	if auth.SourceID == "" {
		var d properties.Decoder
		d.Errorf(nil, "Authorization without a source", "the member instance the authorization is for is empty")
		return "", d.Err()
	}
	file, err := filepath.Abs(props.File)
	if err != nil {
		return "", fmt.Errorf("authorize %s: file %q: %w", auth.SourceID, props.File, err)
	}
	e := Entry{
		SourceID: string(auth.SourceID), Host: auth.Host, Volume: auth.Volume, Options: slices.Clone(auth.Options),
		Tags: maps.Clone(auth.Tags), Address: props.Address, Labels: targetLabels(auth, props),
	}
	if p := bytes.TrimSpace(auth.Properties); len(p) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, p); err != nil {
			return "", fmt.Errorf("authorize %s: properties: %w", auth.SourceID, err)
		}
		e.Props = buf.Bytes()
	}
	var id string
	err = a.change(ctx, []string{file}, func(st *state) error {
		if same := slices.IndexFunc(st.files[file], func(x Entry) bool { return sameAuthorization(x, e) }); same >= 0 {
			id = st.files[file][same].ID
			return nil
		}
		if id, err = st.newID(); err != nil {
			return err
		}
		e.ID = id
		st.set(file, append(slices.Clone(st.files[file]), e))
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("authorize %s: %w", auth.SourceID, err)
	}
	a.cfg.Logger.Info("authorized", "id", id, "source_id", e.SourceID, "file", file, "address", e.Address)
	return id, nil
}

// Revoke removes an authorization's target group; an unknown ID is not an
// error (it is gone already).
func (a *Authorizer) Revoke(ctx context.Context, id string) error {
	err := a.change(ctx, nil, func(st *state) error {
		for _, f := range st.reg.Files {
			entries := st.files[f]
			if i := slices.IndexFunc(entries, func(x Entry) bool { return x.ID == id }); i >= 0 {
				st.set(f, slices.Delete(slices.Clone(entries), i, i+1))
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("revoke %q: %w", id, err)
	}
	return nil
}

// sameAuthorization reports whether x is the authorization e asks for.
func sameAuthorization(x, e Entry) bool {
	return x.SourceID == e.SourceID && x.Host == e.Host && x.Volume == e.Volume &&
		slices.Equal(x.Options, e.Options) && maps.Equal(x.Tags, e.Tags) &&
		x.Address == e.Address && maps.Equal(x.Labels, e.Labels) &&
		bytes.Equal(canonical(x.Props), canonical(e.Props))
}

// canonical re-encodes a JSON value with sorted keys, so properties equal
// as values compare equal as bytes.
func canonical(raw json.RawMessage) []byte {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return raw
	}
	b, err := json.Marshal(v)
	if err != nil {
		return raw
	}
	return b
}
