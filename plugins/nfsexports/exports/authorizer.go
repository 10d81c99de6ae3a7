// Package exports is the NFS authorizer that keeps an exports file (see
// exports(5)) equal to its authorizations: one export line per
// authorization, `<volume> <host>(<options>)`, after a comment line
// recording the authorization (ID, source ID, host, volume, options,
// properties, tags) as JSON, so Describe reads the authorizations back
// from the file itself and the file is the only state.
//
// Every change takes the file's flock (<file>.lock; the CLI's and watch's
// provider processes share the file), rewrites it atomically (temporary
// file, fsync, rename, directory fsync) and then runs `exportfs -ra` when
// exportfs is in PATH, so the NFS server serves what the file says. Without
// exportfs the file is still kept, which is what tests and machines that
// are not NFS servers want.
package exports

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/atomicfile"
	"github.com/infrakit/infrakit/sdk/filelock"
	"github.com/infrakit/infrakit/sdk/instance"
	"github.com/infrakit/infrakit/sdk/nfs"
	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Name is the provider's name; Type is the authorizer type it serves.
const (
	Name = "nfsexports"
	Type = "exports"
)

// Environment variables the provider reads.
const (
	EnvFile           = "INFRAKIT_NFS_EXPORTS_FILE"    // default /etc/exports.d/infrakit.exports
	EnvExportfs       = "INFRAKIT_NFS_EXPORTFS"        // exportfs command; "none" never runs it
	EnvDefaultOptions = "INFRAKIT_NFS_DEFAULT_OPTIONS" // options of an authorization without any
	DefaultFile       = "/etc/exports.d/infrakit.exports"
)

// DefaultOptions are the export options of an authorization that names none.
const DefaultOptions = "rw,sync,no_subtree_check"

// Config configures an Authorizer; zero values take the defaults.
type Config struct {
	// File is the exports file; its directory is created if missing.
	File string
	// Exportfs is the exportfs command, looked up in PATH; "none" never
	// runs it. A command not found is not an error (it is logged).
	Exportfs string
	// DefaultOptions for authorizations without options.
	DefaultOptions []string
	// ExportfsTimeout bounds one exportfs run; default 30s.
	ExportfsTimeout time.Duration
	Logger          hclog.Logger
}

// ConfigFromEnv reads a Config from environment variables.
func ConfigFromEnv(getenv func(string) string) (Config, error) {
	c := Config{File: getenv(EnvFile), Exportfs: getenv(EnvExportfs)}
	if v := getenv(EnvDefaultOptions); v != "" {
		opts := strings.Split(v, ",")
		if ds := CheckOptions(opts, EnvDefaultOptions); ds.HasErrors() {
			return c, fmt.Errorf("%s=%q: %w", EnvDefaultOptions, v, ds)
		}
		c.DefaultOptions = opts
	}
	return c, nil
}

// Authorizer is the "exports" NFS authorizer.
type Authorizer struct {
	cfg      Config
	mu       sync.Mutex // one change at a time in this process; the flock covers others
	warnOnce sync.Once  // "exportfs not found" is logged once per process
}

var _ nfs.Authorizer = (*Authorizer)(nil)

// New checks cfg and creates the file's directory.
func New(cfg Config) (*Authorizer, error) {
	if cfg.File == "" {
		cfg.File = DefaultFile
	}
	f, err := filepath.Abs(cfg.File)
	if err != nil {
		return nil, fmt.Errorf("exports file %q: %w", cfg.File, err)
	}
	cfg.File = f
	if cfg.Exportfs == "" {
		cfg.Exportfs = "exportfs"
	}
	if cfg.DefaultOptions == nil {
		cfg.DefaultOptions = strings.Split(DefaultOptions, ",")
	}
	if cfg.ExportfsTimeout <= 0 {
		cfg.ExportfsTimeout = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if err := os.MkdirAll(filepath.Dir(cfg.File), 0o755); err != nil {
		return nil, fmt.Errorf("exports file %s: %w", cfg.File, err)
	}
	return &Authorizer{cfg: cfg}, nil
}

// File is the exports file the Authorizer keeps.
func (a *Authorizer) File() string { return a.cfg.File }

// Validate checks an enrollment target's properties: host and volume are
// required, options optional; anything else is refused at its path.
func (a *Authorizer) Validate(ctx context.Context, properties json.RawMessage) error {
	_, err := ParseProperties(properties, true)
	return err
}

// Describe lists the authorizations the file records.
func (a *Authorizer) Describe(ctx context.Context) ([]nfs.Authorization, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// No lock: the file is replaced atomically, so a read sees a whole one.
	entries, _, err := read(a.cfg.File)
	if err != nil {
		return nil, fmt.Errorf("describe: %w", err)
	}
	out := make([]nfs.Authorization, 0, len(entries))
	for _, e := range entries {
		out = append(out, nfs.Authorization{
			ID:         e.ID,
			SourceID:   instance.ID(e.SourceID),
			Host:       e.Host,
			Volume:     e.Volume,
			Options:    e.Options,
			Properties: e.Properties,
			Tags:       e.Tags,
		})
	}
	slices.SortFunc(out, func(x, y nfs.Authorization) int { return strings.Compare(x.ID, y.ID) })
	return out, nil
}

// Authorize adds an export for auth and returns its ID ("exp-" and 8 hex
// digits). Host, volume and options are the authorization's own fields,
// or, where those are empty, its properties' (an enrollment sets both
// alike); all are checked as in Validate.
func (a *Authorizer) Authorize(ctx context.Context, auth nfs.Authorization) (string, error) {
	props, err := ParseProperties(auth.Properties, false)
	if err != nil {
		return "", err
	}
	e := Entry{
		SourceID: string(auth.SourceID),
		Host:     cmp.Or(auth.Host, props.Host),
		Volume:   cmp.Or(auth.Volume, props.Volume),
		Options:  auth.Options,
		Tags:     maps.Clone(auth.Tags),
	}
	if len(e.Options) == 0 {
		e.Options = props.Options
	}
	var d properties.Decoder
	if e.SourceID == "" {
		d.Errorf(nil, "Authorization without a source", "the member instance the authorization is for is empty")
	}
	checkTarget(&d, "host", e.Host)
	checkTarget(&d, "volume", e.Volume)
	checkOptions(&d, e.Options, []string{"options"})
	if err := d.Err(); err != nil {
		return "", err
	}
	if p := bytes.TrimSpace(auth.Properties); len(p) > 0 {
		var buf bytes.Buffer
		if err := json.Compact(&buf, p); err != nil {
			return "", fmt.Errorf("authorize %s: properties: %w", auth.SourceID, err)
		}
		e.Properties = buf.Bytes()
	}
	err = a.change(ctx, func(entries []Entry) ([]Entry, bool, error) {
		for attempt := 0; ; attempt++ {
			id, err := newID()
			if err != nil {
				return nil, false, err
			}
			if !slices.ContainsFunc(entries, func(x Entry) bool { return x.ID == id }) {
				e.ID = id
				return append(entries, e), true, nil
			}
			if attempt > 10 {
				return nil, false, errors.New("no unused authorization ID after 10 tries")
			}
		}
	})
	if err != nil {
		return "", fmt.Errorf("authorize %s: %w", auth.SourceID, err)
	}
	a.cfg.Logger.Info("authorized", "id", e.ID, "source_id", e.SourceID, "host", e.Host, "volume", e.Volume)
	return e.ID, nil
}

// Revoke removes an authorization's export; a missing one is not an error.
func (a *Authorizer) Revoke(ctx context.Context, id string) error {
	err := a.change(ctx, func(entries []Entry) ([]Entry, bool, error) {
		n := len(entries)
		entries = slices.DeleteFunc(entries, func(x Entry) bool { return x.ID == id })
		return entries, len(entries) != n, nil
	})
	if err != nil {
		return fmt.Errorf("revoke %q: %w", id, err)
	}
	return nil
}

// change applies fn to the file's entries under the lock and, when fn
// changed them, writes the file and runs exportfs.
func (a *Authorizer) change(ctx context.Context, fn func([]Entry) ([]Entry, bool, error)) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	// The lock file does not end in .exports, so exportfs never reads it.
	unlock, err := filelock.Lock(ctx, a.cfg.File+".lock")
	if err != nil {
		return err
	}
	defer unlock()
	entries, stray, err := read(a.cfg.File)
	if err != nil {
		return err
	}
	entries, changed, err := fn(entries)
	if err != nil || !changed {
		return err
	}
	if len(stray) > 0 {
		a.cfg.Logger.Warn("dropping export lines that no authorization records", "file", a.cfg.File, "lines", stray)
	}
	data, err := Render(entries, a.cfg.DefaultOptions)
	if err != nil {
		return err
	}
	// Atomically, so exportfs and Describe in another process see the old
	// file or the new one; the temporary file's name (.*.tmp) is not one
	// exportfs reads (*.exports).
	if err := atomicfile.WriteFile(a.cfg.File, data, 0o644); err != nil {
		return err
	}
	return a.exportfs(ctx)
}

// exportfs runs `exportfs -ra` when the command exists. Its failure is an
// error (the file is written and Describe shows the change; the NFS server
// does not serve it yet, which the caller must hear about).
func (a *Authorizer) exportfs(ctx context.Context) error {
	if a.cfg.Exportfs == "none" {
		return nil
	}
	path, err := exec.LookPath(a.cfg.Exportfs)
	if err != nil {
		a.warnOnce.Do(func() {
			a.cfg.Logger.Info("exportfs not found; the exports file is kept but not applied", "command", a.cfg.Exportfs, "file", a.cfg.File)
		})
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, a.cfg.ExportfsTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "-ra").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s written, but `%s -ra` failed: %w: %s", a.cfg.File, path, err, strings.TrimSpace(string(out)))
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		a.cfg.Logger.Warn("exportfs -ra", "output", s)
	}
	return nil
}

func newID() (string, error) {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("authorization ID: %w", err)
	}
	return "exp-" + hex.EncodeToString(b), nil
}

// Metadata says the provider serves the "exports" authorizer type.
func Metadata(version string) provider.Metadata {
	return provider.Metadata{
		Name:    Name,
		Version: version,
		Objects: []provider.Object{{Kind: provider.KindAuthorizer, Type: Type, Schema: Schema()}},
	}
}
