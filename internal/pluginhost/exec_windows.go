package pluginhost

import "io/fs"

// isExecutable is true on Windows, where the .exe suffix decides.
func isExecutable(fs.FileInfo) bool { return true }
