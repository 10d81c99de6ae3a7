package plugin

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/profiling"
)

// EnvProviderCPUProfile names the file prefix of a Go CPU profile of each
// provider process (written to <prefix>.<pid> when the host shuts it
// down), for telling provider time from infrakit's. Providers inherit it
// only when INFRAKIT_PROVIDER_ENV names it.
const EnvProviderCPUProfile = "INFRAKIT_PROVIDER_CPUPROFILE"

// startProfile starts the CPU profile EnvProviderCPUProfile asks for, if
// any, and returns what ends it; a failure is logged, not fatal.
func startProfile(logger hclog.Logger) func() {
	prefix := os.Getenv(EnvProviderCPUProfile)
	if prefix == "" {
		return func() {}
	}
	path := fmt.Sprintf("%s.%d", prefix, os.Getpid())
	stop, err := profiling.Start(func(name string) string {
		if name == profiling.EnvCPU {
			return path
		}
		return ""
	})
	if err != nil {
		logger.Warn("no CPU profile", "error", err)
		return func() {}
	}
	return func() {
		if err := stop(); err != nil {
			logger.Warn("writing the CPU profile", "error", err)
		}
	}
}
