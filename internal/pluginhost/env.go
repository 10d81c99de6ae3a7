package pluginhost

import (
	"slices"
	"strings"
)

// EnvProviderEnv names further variables of infrakit's environment that
// providers inherit, beyond the allow-list (see inheritable).
const EnvProviderEnv = "INFRAKIT_PROVIDER_ENV"

// Providers do not inherit infrakit's whole environment: it may hold
// secrets that are infrakit's alone (INFRAKIT_ETCD_PASSWORD, a cloud
// credential the operator exported for something else). They inherit the
// variables a process needs to run (inheritedNames, inheritedPrefixes) and
// the settings of the shipped providers; the operator names more in
// INFRAKIT_PROVIDER_ENV; Options.Env and go-plugin's handshake variables
// are added on top. website/writing-a-provider.md documents the list.
var (
	inheritedNames = []string{
		"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "LANG", "LANGUAGE",
		// TLS roots, for providers that call an API over HTTPS.
		"SSL_CERT_FILE", "SSL_CERT_DIR",
		// The Go runtime's knobs (a provider is a Go program).
		"GOMAXPROCS", "GOMEMLIMIT", "GOGC", "GODEBUG", "GOTRACEBACK",
		// Provider settings: the log level, and the docker provider's engine.
		"INFRAKIT_LOG", "DOCKER_HOST",
	}
	inheritedPrefixes = []string{
		"LC_",
		// The settings of the shipped providers (plugins/*/: ConfigFromEnv).
		"INFRAKIT_SIMULATOR_", "INFRAKIT_PROCESS_", "INFRAKIT_DOCKER_",
		"INFRAKIT_HAPROXY_", "INFRAKIT_NFS_", "INFRAKIT_PROMETHEUS_",
	}
)

// inheritable returns which variables of infrakit's environment a provider
// inherits: the allow-list, and the names (or, ending in "*", prefixes)
// listed in extra, an INFRAKIT_PROVIDER_ENV value (separated by commas or
// white space).
func inheritable(extra string) func(name string) bool {
	names := slices.Clone(inheritedNames)
	prefixes := slices.Clone(inheritedPrefixes)
	for _, e := range strings.FieldsFunc(extra, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		if p, ok := strings.CutSuffix(e, "*"); ok {
			prefixes = append(prefixes, p) // "*" alone: everything, as before the allow-list
			continue
		}
		names = append(names, e)
	}
	return func(name string) bool {
		if slices.Contains(names, name) {
			return true
		}
		for _, p := range prefixes {
			if strings.HasPrefix(name, p) {
				return true
			}
		}
		return false
	}
}
