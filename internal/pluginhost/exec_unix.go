//go:build !windows

package pluginhost

import "io/fs"

// isExecutable reports whether anyone may execute the file.
func isExecutable(fi fs.FileInfo) bool { return fi.Mode().Perm()&0o111 != 0 }
