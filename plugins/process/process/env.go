package process

import (
	"maps"
	"slices"
	"strconv"
	"strings"
)

// inheritedEnvDropped says which variables of the provider's own
// environment an instance does not inherit: go-plugin's handshake variables
// and the host's pid, which would make a Go program that is itself a plugin
// host or provider misbehave, and the provider's own settings.
func inheritedEnvDropped(key string) bool {
	return strings.HasPrefix(key, "PLUGIN_") ||
		key == "INFRAKIT_PROVIDER_PLUGIN" || // the handshake cookie
		key == "INFRAKIT_PLUGIN_HOST_PID" ||
		key == EnvDir
}

// childEnv is an instance's environment: the provider's own (less what
// inheritedEnvDropped names), then the env property, then what the provider
// sets for every instance, later entries winning. The result has one entry
// per name, sorted, so it is deterministic.
func childEnv(inherited []string, props map[string]string, port int, id, logicalID, init string) []string {
	env := map[string]string{}
	for _, kv := range inherited {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" || inheritedEnvDropped(k) {
			continue
		}
		env[k] = v
	}
	maps.Copy(env, props)
	env[EnvPort] = strconv.Itoa(port)
	env[EnvInstanceID] = id
	delete(env, EnvLogicalID)
	if logicalID != "" {
		env[EnvLogicalID] = logicalID
	}
	delete(env, EnvInit)
	if init != "" {
		env[EnvInit] = init
	}
	out := make([]string, 0, len(env))
	for _, k := range slices.Sorted(maps.Keys(env)) {
		out = append(out, k+"="+env[k])
	}
	return out
}
