package process

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Defaults of the instance properties.
const (
	DefaultPortFrom    = 20000
	DefaultPortTo      = 20999
	DefaultKillTimeout = 5 * time.Second
)

// Environment variables the provider sets for every process; properties may
// not set them.
const (
	EnvPort       = "PORT"
	EnvInstanceID = "INFRAKIT_INSTANCE_ID"
	EnvLogicalID  = "INFRAKIT_LOGICAL_ID"
	EnvInit       = "INFRAKIT_INIT"
)

// PortRange is an inclusive range of TCP ports.
type PortRange struct {
	From int `json:"from"`
	To   int `json:"to"`
}

// Properties are the decoded instance properties.
type Properties struct {
	Command string
	Args    []string
	Env     map[string]string
	Dir     string
	Ports   PortRange
	// KillTimeout is how long Destroy waits after SIGTERM before SIGKILL.
	KillTimeout time.Duration
}

// Schema is the schema of the instance properties.
func Schema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"command": {Type: "string", Required: true,
			Description: "Program to run: a name looked up in PATH, or a path (relative paths are relative to the stack directory)."},
		"args": {Type: "list(string)", Description: "Arguments passed to the command."},
		"env": {Type: "map(string)",
			Description: "Environment added to the provider's; PORT, INFRAKIT_INSTANCE_ID, INFRAKIT_LOGICAL_ID and INFRAKIT_INIT are set by the provider."},
		"dir": {Type: "string", Description: "Working directory (relative to the stack directory); default the stack directory."},
		"ports": {Type: "object({from=number, to=number})",
			Description: fmt.Sprintf("Range the instance's $PORT is chosen from, inclusive; default %d-%d.", DefaultPortFrom, DefaultPortTo)},
		"kill_timeout": {Type: "string",
			Description: fmt.Sprintf("How long Destroy waits after SIGTERM before SIGKILL of the process group (a Go duration); default %s.", DefaultKillTimeout)},
	}}
}

var topKeys = []string{"command", "args", "env", "dir", "ports", "kill_timeout"}

// reservedEnv are set by the provider; an env property may not set them.
var reservedEnv = []string{EnvPort, EnvInstanceID, EnvLogicalID, EnvInit}

// Parse decodes and checks the properties. A non-nil error is
// provider.Diagnostics with one diagnostic per problem, each at the path of
// the offending attribute (["command"], ["args", "1"], ["env", "PORT"],
// ["ports", "to"]).
func Parse(raw json.RawMessage) (Properties, error) {
	p := Properties{
		Ports:       PortRange{From: DefaultPortFrom, To: DefaultPortTo},
		KillTimeout: DefaultKillTimeout,
	}
	var d properties.Decoder
	missingCommand := func() {
		d.Errorf([]string{"command"}, "Missing required argument", "The process instance needs a command to run.")
	}
	if properties.IsNull(raw) {
		missingCommand()
		return Properties{}, d.Err()
	}
	fields, ok := d.Object(raw, nil, topKeys, "the process instance's properties")
	if !ok {
		return Properties{}, d.Err()
	}
	if v, ok := fields.Get("command"); !ok {
		missingCommand()
	} else if s, ok := d.String(v, []string{"command"}); ok {
		if strings.TrimSpace(s) == "" {
			d.Errorf([]string{"command"}, "Invalid value", "command must not be empty.")
		}
		p.Command = s
	}
	if v, ok := fields.Get("args"); ok {
		p.Args = d.StringList(v, []string{"args"})
	}
	if v, ok := fields.Get("env"); ok {
		p.Env = d.Environment(v, []string{"env"}, reservedEnv, "the process provider for each instance")
	}
	if v, ok := fields.Get("dir"); ok {
		p.Dir, _ = d.String(v, []string{"dir"})
	}
	if v, ok := fields.Get("ports"); ok {
		if r, ok := decodePorts(&d, v); ok {
			p.Ports = r
		}
	}
	if v, ok := fields.Get("kill_timeout"); ok {
		if dur, ok := d.Duration(v, []string{"kill_timeout"}); ok {
			p.KillTimeout = dur
		}
	}
	if err := d.Err(); err != nil {
		return Properties{}, err
	}
	return p, nil
}

// decodePorts decodes ports = {from, to}: both TCP ports, from <= to.
func decodePorts(d *properties.Decoder, raw json.RawMessage) (PortRange, bool) {
	path := []string{"ports"}
	fields, ok := d.Object(raw, path, []string{"from", "to"}, "ports")
	if !ok {
		return PortRange{}, false
	}
	n := len(d.Diags)
	var r PortRange
	for _, k := range []string{"from", "to"} {
		at := properties.Append(path, k)
		v, ok := fields.Get(k)
		if !ok {
			d.Errorf(at, "Missing required argument", "ports needs %q.", k)
			continue
		}
		port, ok := d.Int(v, at)
		if !ok {
			continue
		}
		if port < 1 || port > 65535 {
			d.Errorf(at, "Invalid port", "ports.%s = %d is not a TCP port (1-65535).", k, port)
		}
		if k == "from" {
			r.From = port
		} else {
			r.To = port
		}
	}
	if len(d.Diags) > n {
		return PortRange{}, false
	}
	if r.From > r.To {
		d.Errorf(path, "Invalid port range", "ports.from (%d) is above ports.to (%d).", r.From, r.To)
		return PortRange{}, false
	}
	return r, true
}
