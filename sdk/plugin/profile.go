package plugin

import (
	"fmt"
	"os"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/profiling"
)

// EnvProviderCPUProfile and EnvProviderMemProfile name the file prefixes
// of a Go CPU profile and a heap profile of each provider process (written
// to <prefix>.<pid> when the host shuts it down), for telling provider
// time and memory from infrakit's. Providers inherit them only when
// INFRAKIT_PROVIDER_ENV names them.
const (
	EnvProviderCPUProfile = "INFRAKIT_PROVIDER_CPUPROFILE"
	EnvProviderMemProfile = "INFRAKIT_PROVIDER_MEMPROFILE"
)

// startProfile starts the profiles EnvProviderCPUProfile and
// EnvProviderMemProfile ask for, if any, and returns what ends them and
// writes them; a failure is logged, not fatal.
func startProfile(logger hclog.Logger) func() {
	paths := map[string]string{}
	for env, prefix := range map[string]string{
		profiling.EnvCPU: os.Getenv(EnvProviderCPUProfile),
		profiling.EnvMem: os.Getenv(EnvProviderMemProfile),
	} {
		if prefix != "" {
			paths[env] = fmt.Sprintf("%s.%d", prefix, os.Getpid())
		}
	}
	if len(paths) == 0 {
		return func() {}
	}
	stop, err := profiling.Start(func(name string) string { return paths[name] })
	if err != nil {
		logger.Warn("no profile", "error", err)
		return func() {}
	}
	return func() {
		if err := stop(); err != nil {
			logger.Warn("writing the profiles", "error", err)
		}
	}
}
