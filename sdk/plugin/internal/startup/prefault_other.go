//go:build !linux

package startup

// Prefault does nothing: MADV_POPULATE_* is Linux's.
func Prefault() {}
