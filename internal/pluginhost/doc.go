// Package pluginhost finds, installs, pins and runs provider binaries.
//
// A provider is a binary named infrakit-provider-<name>. `infrakit init`
// finds it (Discover), copies it into the working directory's plugins
// directory (Install) and records its version and sha256 in the lock file
// (.infrakit.lock.hcl, see Lock). Every later command runs providers through a
// Host, which launches the installed binary only when it still has the locked
// checksum, keeps one process per provider key ("simulator",
// "simulator.nfs-auth"), hands each its provider block's configuration
// (SetConfig) before its first use and whenever the block changed,
// relaunches a crashed one with backoff and kills them all on Close.
package pluginhost

import (
	"path/filepath"
	"runtime"
)

// BinaryPrefix is the file name prefix of every provider binary.
const BinaryPrefix = "infrakit-provider-"

// LockFileName is the lock file in the working directory.
const LockFileName = ".infrakit.lock.hcl"

// relPluginsDir is where providers are installed, relative to the working directory.
const relPluginsDir = ".infrakit/plugins"

// BinaryName is the file name of a provider's binary on this platform.
func BinaryName(name string) string {
	if runtime.GOOS == "windows" {
		return BinaryPrefix + name + ".exe"
	}
	return BinaryPrefix + name
}

// Platform is "<os>_<arch>" of the running infrakit, the last directory level
// under a provider version in the plugins directory.
func Platform() string { return runtime.GOOS + "_" + runtime.GOARCH }

// PluginsDir is the plugins directory of a working directory.
func PluginsDir(workdir string) string {
	return filepath.Join(workdir, filepath.FromSlash(relPluginsDir))
}

// InstallPath is where the binary of a provider version is installed:
// <workdir>/.infrakit/plugins/<name>/<version>/<os>_<arch>/infrakit-provider-<name>.
func InstallPath(workdir, name, version string) string {
	return filepath.Join(PluginsDir(workdir), name, version, Platform(), BinaryName(name))
}
