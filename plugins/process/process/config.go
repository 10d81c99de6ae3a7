package process

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/provider"
)

// Name is the provider's name; Type is the instance type it serves.
const (
	Name = "process"
	Type = "process"
)

// EnvDir names the provider's state directory; DefaultDir is used when it is
// unset, relative to the provider's working directory (the host starts
// providers in the stack's directory).
const (
	EnvDir     = "INFRAKIT_PROCESS_DIR"
	DefaultDir = ".infrakit/process"
)

// DefaultPollInterval is how often Watch re-reads the records (to see what
// other provider processes did) and how often an instance's exit is polled
// where pidfds are not available.
const DefaultPollInterval = 200 * time.Millisecond

// Config is how a Provider runs.
type Config struct {
	// Dir is the state directory: records and logs.
	Dir string
	// WorkDir is what relative command and dir properties are resolved
	// against; empty means the provider's working directory.
	WorkDir string
	// PollInterval; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// Logger; nil discards.
	Logger hclog.Logger
}

// ConfigFromEnv reads the configuration from the environment through
// getenv (os.Getenv in main): INFRAKIT_PROCESS_DIR, default DefaultDir.
func ConfigFromEnv(getenv func(string) string) Config {
	dir := getenv(EnvDir)
	if dir == "" {
		dir = DefaultDir
	}
	return Config{Dir: dir}
}

// Metadata describes the process provider.
func Metadata(version string) provider.Metadata {
	return provider.Metadata{
		Name:    Name,
		Version: version,
		Objects: []provider.Object{{Kind: provider.KindInstance, Type: Type, Schema: Schema()}},
	}
}
