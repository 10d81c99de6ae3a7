package pluginhost

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/atomicfile"
	"github.com/infrakit/infrakit/sdk/plugin"
	"github.com/infrakit/infrakit/sdk/provider"
)

// InstalledProvider is one provider binary in a working directory's plugins
// directory.
type InstalledProvider struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Path is the installed binary.
	Path string `json:"path"`
	// Source is where Install copied it from (empty when listed by Installed).
	Source string `json:"source,omitempty"`
	// SHA256 is the checksum of the installed binary as it is on disk now
	// (empty when it is missing).
	SHA256 Hash `json:"sha256,omitempty"`
	// Status compares the binary with the lock file (set by Installed).
	Status Status `json:"status,omitempty"`
}

// Status says whether an installed binary is the one the lock file pins.
type Status string

// Statuses reported by Installed.
const (
	// StatusOK: locked, and the binary has a locked checksum.
	StatusOK Status = "ok"
	// StatusMismatch: locked, but the binary changed since it was installed;
	// Host refuses to run it.
	StatusMismatch Status = "mismatch"
	// StatusMissing: locked, but no binary is installed for this platform.
	StatusMissing Status = "missing"
	// StatusUnlocked: installed, but the lock file does not name this version.
	StatusUnlocked Status = "unlocked"
)

// LaunchOptions are how provider processes are started; they are shared by
// Install (which asks a binary its version) and Host.
type LaunchOptions struct {
	Logger hclog.Logger
	// StartTimeout bounds each handshake; zero means the sdk/plugin default.
	StartTimeout time.Duration
	DisableMTLS  bool
	// Env is added to each provider's environment ("KEY=value") and wins
	// over infrakit's own.
	Env []string
}

// InstallOptions control Install.
type InstallOptions struct {
	LaunchOptions
	// Name is the provider name; empty takes it from the file name
	// (infrakit-provider-<name>).
	Name string
	// Version is recorded as given; empty asks the binary (it is launched
	// once and its Metadata read).
	Version string
}

// Probe launches a provider binary, asks it for its Metadata and stops it.
func Probe(ctx context.Context, name, path string, opts LaunchOptions) (md provider.Metadata, err error) {
	c, err := plugin.Start(ctx, plugin.ClientConfig{
		Name:         name,
		Path:         path,
		Env:          opts.Env,
		StartTimeout: opts.StartTimeout,
		DisableMTLS:  opts.DisableMTLS,
		Logger:       logger(opts.Logger),
	})
	if err != nil {
		return md, fmt.Errorf("provider %q: start %s: %w", name, path, err)
	}
	defer c.Kill()
	md, err = c.Metadata(ctx)
	if err != nil {
		return md, fmt.Errorf("provider %q: ask %s for its version: %w", name, path, err)
	}
	return md, nil
}

// probeVersion asks the binary at path for its version, checking that it
// is the provider it is meant to be.
func probeVersion(ctx context.Context, name, path string, opts LaunchOptions) (string, error) {
	md, err := Probe(ctx, name, path, opts)
	if err != nil {
		return "", err
	}
	if md.Name != name {
		return "", fmt.Errorf("provider %q: %s says it is provider %q", name, path, md.Name)
	}
	if md.Version == "" {
		return "", fmt.Errorf("provider %q: %s reports no version", name, path)
	}
	return md.Version, nil
}

// Install copies the provider binary src into workdir's plugins directory at
// <name>/<version>/<os>_<arch>/infrakit-provider-<name> (mode 0755, written to
// a temporary file and renamed) and returns what it installed with the
// checksum of the installed file. It does not touch the lock file.
//
// When the version is not given the binary is launched to ask for it, and it
// must then also say it is the provider name expects.
func Install(ctx context.Context, workdir, src string, opts InstallOptions) (InstalledProvider, error) {
	src, err := filepath.Abs(src)
	if err != nil {
		return InstalledProvider{}, fmt.Errorf("install %s: %w", src, err)
	}
	name := opts.Name
	if name == "" {
		n, ok := NameFromPath(src)
		if !ok {
			return InstalledProvider{}, fmt.Errorf("install %s: provider binaries are named %s<name>", src, BinaryPrefix)
		}
		name = n
	}
	if err := checkPathComponent("name", name); err != nil {
		return InstalledProvider{}, fmt.Errorf("install %s: %w", src, err)
	}
	fi, err := os.Stat(src)
	if err != nil {
		return InstalledProvider{}, fmt.Errorf("provider %q: install: %w", name, err)
	}
	if !fi.Mode().IsRegular() {
		return InstalledProvider{}, fmt.Errorf("provider %q: install %s: not a regular file", name, src)
	}
	version := opts.Version
	if version == "" {
		if version, err = probeVersion(ctx, name, src, opts.LaunchOptions); err != nil {
			return InstalledProvider{}, err
		}
	}
	if err := checkPathComponent("version", version); err != nil {
		return InstalledProvider{}, fmt.Errorf("provider %q: install %s: %w", name, src, err)
	}
	dst := InstallPath(workdir, name, version)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return InstalledProvider{}, fmt.Errorf("provider %q: install: %w", name, err)
	}
	sum, err := copyBinary(dst, src)
	if err != nil {
		return InstalledProvider{}, fmt.Errorf("provider %q: install: %w", name, err)
	}
	return InstalledProvider{Name: name, Version: version, Path: dst, Source: src, SHA256: sum}, nil
}

// copyBinary copies src to dst atomically with mode 0755 and returns the
// checksum of the bytes written, which are the bytes installed.
func copyBinary(dst, src string) (Hash, error) {
	in, err := os.Open(src)
	if err != nil {
		return "", err
	}
	defer in.Close()
	h := sha256.New()
	err = atomicfile.WriteStream(dst, 0o755, func(w io.Writer) error {
		_, err := io.Copy(io.MultiWriter(w, h), in)
		return err
	})
	if err != nil {
		return "", err
	}
	return hashOf(h.Sum(nil)), nil
}

// Installed lists the providers installed in workdir for this platform and
// those the lock file names, sorted by name then version, each with its
// Status against the lock file.
func Installed(workdir string) ([]InstalledProvider, error) {
	lock, err := LoadLock(workdir)
	if err != nil {
		return nil, err
	}
	var out []InstalledProvider
	locked := map[string]bool{}
	for _, lp := range lock.Providers() {
		locked[lp.Name+"@"+lp.Version] = true
		p := InstalledProvider{Name: lp.Name, Version: lp.Version, Path: InstallPath(workdir, lp.Name, lp.Version)}
		sum, err := HashFile(p.Path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			p.Status = StatusMissing
		case err != nil:
			return nil, fmt.Errorf("provider %q: %w", lp.Name, err)
		case lp.Accepts(sum):
			p.SHA256, p.Status = sum, StatusOK
		default:
			p.SHA256, p.Status = sum, StatusMismatch
		}
		out = append(out, p)
	}
	// Binaries present but not locked: left by an older init, or copied by hand.
	matches, err := filepath.Glob(filepath.Join(PluginsDir(workdir), "*", "*", Platform(), BinaryPrefix+"*"))
	if err != nil {
		return nil, err
	}
	for _, path := range matches {
		versionDir := filepath.Dir(filepath.Dir(path))
		name, version := filepath.Base(filepath.Dir(versionDir)), filepath.Base(versionDir)
		if filepath.Base(path) != BinaryName(name) || locked[name+"@"+version] {
			continue
		}
		sum, err := HashFile(path)
		if err != nil {
			return nil, fmt.Errorf("provider %q: %w", name, err)
		}
		out = append(out, InstalledProvider{Name: name, Version: version, Path: path, SHA256: sum, Status: StatusUnlocked})
	}
	sortInstalled(out)
	return out, nil
}

// Uninstall removes every installed version of a provider and its lock
// entry. It reports whether there was anything to remove.
func Uninstall(workdir, name string) (bool, error) {
	if err := checkPathComponent("name", name); err != nil {
		return false, fmt.Errorf("provider %q: %w", name, err)
	}
	lock, err := LoadLock(workdir)
	if err != nil {
		return false, err
	}
	dir := filepath.Join(PluginsDir(workdir), name)
	_, statErr := os.Stat(dir)
	found := statErr == nil
	if err := os.RemoveAll(dir); err != nil {
		return false, fmt.Errorf("provider %q: remove: %w", name, err)
	}
	if lock.Remove(name) {
		found = true
		if err := lock.Save(workdir); err != nil {
			return false, fmt.Errorf("provider %q: remove from lock file: %w", name, err)
		}
	}
	return found, nil
}

// logger returns l, or a logger that drops everything.
func logger(l hclog.Logger) hclog.Logger {
	if l == nil {
		return hclog.NewNullLogger()
	}
	return l
}

// sortInstalled orders providers by name, then version.
func sortInstalled(ps []InstalledProvider) {
	slices.SortFunc(ps, func(a, b InstalledProvider) int {
		if c := strings.Compare(a.Name, b.Name); c != 0 {
			return c
		}
		return strings.Compare(a.Version, b.Version)
	})
}

// checkPathComponent refuses names and versions that would escape or
// restructure the plugins directory when used as one directory level.
func checkPathComponent(what, s string) error {
	if s == "" || s == "." || s == ".." || strings.ContainsAny(s, `/\:`) {
		return fmt.Errorf("%s %q cannot be a directory name in the plugins directory", what, s)
	}
	return nil
}
