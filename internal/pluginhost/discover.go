package pluginhost

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// PluginPathEnv lists extra directories to search for provider binaries,
// separated like PATH.
const PluginPathEnv = "INFRAKIT_PLUGIN_PATH"

// SearchDir is one directory init looks in, with why it is searched (shown
// when a provider is not found).
type SearchDir struct {
	Path   string
	Source string // "-plugin-dir", "$INFRAKIT_PLUGIN_PATH", "~/.infrakit/plugins", "infrakit binary"
}

// SearchDirs is the provider search order for `infrakit init`: each
// -plugin-dir, then $INFRAKIT_PLUGIN_PATH, then ~/.infrakit/plugins, then the
// directory holding the running infrakit binary. Directories that cannot be
// determined (no home, no executable path) are left out.
func SearchDirs(pluginDirs []string) []SearchDir {
	home, _ := os.UserHomeDir()
	exeDir := ""
	if exe, err := os.Executable(); err == nil {
		if resolved, err := filepath.EvalSymlinks(exe); err == nil {
			exe = resolved
		}
		exeDir = filepath.Dir(exe)
	}
	return searchDirs(pluginDirs, os.Getenv(PluginPathEnv), home, exeDir)
}

// searchDirs is SearchDirs with its environment passed in.
func searchDirs(pluginDirs []string, pluginPath, home, exeDir string) []SearchDir {
	var out []SearchDir
	seen := map[string]bool{}
	add := func(path, source string) {
		if path == "" {
			return
		}
		if abs, err := filepath.Abs(path); err == nil {
			path = abs
		}
		// A directory searched twice would only repeat itself in the "looked in" list.
		if seen[path] {
			return
		}
		seen[path] = true
		out = append(out, SearchDir{Path: path, Source: source})
	}
	for _, d := range pluginDirs {
		add(d, "-plugin-dir")
	}
	for _, d := range filepath.SplitList(pluginPath) {
		add(d, "$"+PluginPathEnv)
	}
	if home != "" {
		add(filepath.Join(home, ".infrakit", "plugins"), "~/.infrakit/plugins")
	}
	add(exeDir, "infrakit binary")
	return out
}

// NotFoundError says a provider binary is in none of the search directories.
type NotFoundError struct {
	Name     string
	Searched []SearchDir
}

func (e *NotFoundError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "provider %q: no %s found; looked in:", e.Name, BinaryName(e.Name))
	for _, d := range e.Searched {
		fmt.Fprintf(&b, "\n  %s (%s)", d.Path, d.Source)
	}
	if len(e.Searched) == 0 {
		b.WriteString(" nowhere (no search directories)")
	}
	return b.String()
}

// Find returns the path of the first infrakit-provider-<name> in dirs that is
// a regular, executable file. When there is none the error is a *NotFoundError.
func Find(name string, dirs []SearchDir) (string, error) {
	bin := BinaryName(name)
	for _, d := range dirs {
		path := filepath.Join(d.Path, bin)
		fi, err := os.Stat(path)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, fs.ErrPermission) {
			continue
		}
		if err != nil {
			return "", fmt.Errorf("provider %q: %w", name, err)
		}
		if fi.Mode().IsRegular() && isExecutable(fi) {
			return path, nil
		}
	}
	return "", &NotFoundError{Name: name, Searched: dirs}
}

// NameFromPath returns the provider name a binary's file name carries
// ("infrakit-provider-simulator" -> "simulator").
func NameFromPath(path string) (string, bool) {
	base := strings.TrimSuffix(filepath.Base(path), ".exe")
	name, ok := strings.CutPrefix(base, BinaryPrefix)
	if !ok || name == "" {
		return "", false
	}
	return name, true
}

// Found is a provider binary Discover found: its name and version as the
// binary reports them, where it is and its checksum.
type Found struct {
	Name    string
	Version string
	Path    string
	SHA256  Hash
}

// Discover finds provider name in dirs (see Find), launches it once to ask
// its version (the binary must say it is provider name) and hashes it.
func Discover(ctx context.Context, name string, dirs []SearchDir, opts LaunchOptions) (Found, error) {
	path, err := Find(name, dirs)
	if err != nil {
		return Found{}, err
	}
	version, err := probeVersion(ctx, name, path, opts)
	if err != nil {
		return Found{}, err
	}
	sum, err := HashFile(path)
	if err != nil {
		return Found{}, fmt.Errorf("provider %q: %w", name, err)
	}
	return Found{Name: name, Version: version, Path: path, SHA256: sum}, nil
}
