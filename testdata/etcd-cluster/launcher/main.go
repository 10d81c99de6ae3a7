// Command launcher is the entrypoint of testdata/etcd-cluster's image: it
// reads the init script the docker provider passes in INFRAKIT_INIT (the
// etcdmember flavor's `export NAME='value'` lines), sets those variables,
// and runs etcd in its place with its arguments. An image FROM scratch has
// no shell to run the script with; an image with one could run
// `eval "$INFRAKIT_INIT"; exec etcd` instead.
//
// Only the form the flavor writes is read: `export NAME='value'` or
// `NAME=value`, one a line, with blank lines and # comments; any other line
// stops it with an error rather than starting etcd half configured.
//
// Build: CGO_ENABLED=0 go build -o launcher ./testdata/etcd-cluster/launcher
package main

import (
	"fmt"
	"os"
	"strings"
	"syscall"
)

// etcd is the binary the launcher becomes.
const etcd = "/usr/bin/etcd"

func main() {
	env, err := apply(os.Environ(), os.Getenv("INFRAKIT_INIT"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "launcher:", err)
		os.Exit(2)
	}
	args := append([]string{etcd}, os.Args[1:]...)
	if err := syscall.Exec(etcd, args, env); err != nil {
		fmt.Fprintln(os.Stderr, "launcher: exec", etcd+":", err)
		os.Exit(2)
	}
}

// apply returns env with the variables script sets, set (replacing any of
// the same name).
func apply(env []string, script string) ([]string, error) {
	for i, line := range strings.Split(script, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, value, ok := strings.Cut(strings.TrimPrefix(line, "export "), "=")
		if !ok || name == "" || strings.ContainsAny(name, " \t'\"$") {
			return nil, fmt.Errorf("init line %d is not NAME=value: %q", i+1, line)
		}
		if strings.HasPrefix(value, "'") {
			if len(value) < 2 || !strings.HasSuffix(value, "'") || strings.Contains(value[1:len(value)-1], "'") {
				return nil, fmt.Errorf("init line %d: unbalanced quotes: %q", i+1, line)
			}
			value = value[1 : len(value)-1]
		}
		prefix := name + "="
		for j := 0; j < len(env); j++ {
			if strings.HasPrefix(env[j], prefix) {
				env = append(env[:j], env[j+1:]...)
				j--
			}
		}
		env = append(env, prefix+value)
	}
	return env, nil
}
