package container

import (
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/infrakit/infrakit/sdk/provider"
)

// Name is the provider's name; Type is the instance type it serves.
const (
	Name = "docker"
	Type = "container"
)

// EnvDir names the directory of the provider's records (the tags Label
// adds); DefaultDir is used when it is unset, relative to the provider's
// working directory (the host starts providers in the stack's directory).
// EnvHost is Docker's own variable for the Engine's address.
const (
	EnvDir     = "INFRAKIT_DOCKER_DIR"
	DefaultDir = ".infrakit/docker"
	EnvHost    = "DOCKER_HOST"
)

// Config is how a Provider runs.
type Config struct {
	// Host is the Engine's address (unix:///var/run/docker.sock when empty).
	Host string
	// Dir holds the records of tags added by Label.
	Dir string
	// CallTimeout bounds each call to the Engine; 0 means engine.DefaultTimeout.
	CallTimeout time.Duration
	// Logger; nil discards.
	Logger hclog.Logger
}

// ConfigFromEnv reads the configuration from the environment through getenv
// (os.Getenv in main): DOCKER_HOST and INFRAKIT_DOCKER_DIR.
func ConfigFromEnv(getenv func(string) string) Config {
	dir := getenv(EnvDir)
	if dir == "" {
		dir = DefaultDir
	}
	return Config{Host: getenv(EnvHost), Dir: dir}
}

// Metadata describes the docker provider.
func Metadata(version string) provider.Metadata {
	return provider.Metadata{
		Name:    Name,
		Version: version,
		Objects: []provider.Object{{Kind: provider.KindInstance, Type: Type, Schema: Schema()}},
	}
}
