package process

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

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
	var d decoder
	if isNull(raw) {
		d.errorAt([]string{"command"}, "Missing required argument", "The process instance needs a command to run.")
		return Properties{}, d.diags
	}
	fields, ok := d.object(raw, nil, topKeys, "the process instance's properties")
	if !ok {
		return Properties{}, d.diags
	}
	if v, ok := fields["command"]; !ok || isNull(v) {
		d.errorAt([]string{"command"}, "Missing required argument", "The process instance needs a command to run.")
	} else if s, ok := d.str(v, []string{"command"}); ok {
		if strings.TrimSpace(s) == "" {
			d.errorAt([]string{"command"}, "Invalid value", "command must not be empty.")
		}
		p.Command = s
	}
	if v, ok := fields["args"]; ok && !isNull(v) {
		p.Args = d.strList(v, []string{"args"})
	}
	if v, ok := fields["env"]; ok && !isNull(v) {
		p.Env = d.strMap(v, []string{"env"})
		for _, k := range slices.Sorted(maps.Keys(p.Env)) {
			switch {
			case k == "" || strings.ContainsAny(k, "=\x00"):
				d.errorAt([]string{"env", k}, "Invalid environment variable name", "%q cannot be an environment variable name.", k)
			case slices.Contains(reservedEnv, k):
				d.errorAt([]string{"env", k}, "Reserved environment variable", "%s is set by the process provider for each instance.", k)
			}
		}
	}
	if v, ok := fields["dir"]; ok && !isNull(v) {
		p.Dir, _ = d.str(v, []string{"dir"})
	}
	if v, ok := fields["ports"]; ok && !isNull(v) {
		if r, ok := d.ports(v); ok {
			p.Ports = r
		}
	}
	if v, ok := fields["kill_timeout"]; ok && !isNull(v) {
		if s, ok := d.str(v, []string{"kill_timeout"}); ok {
			dur, err := time.ParseDuration(s)
			switch {
			case err != nil:
				d.errorAt([]string{"kill_timeout"}, "Invalid duration", "kill_timeout %q is not a duration such as \"5s\" or \"500ms\".", s)
			case dur < 0:
				d.errorAt([]string{"kill_timeout"}, "Invalid duration", "kill_timeout must not be negative.")
			default:
				p.KillTimeout = dur
			}
		}
	}
	if err := d.diags.Err(); err != nil {
		return Properties{}, err
	}
	return p, nil
}

// ports decodes {from, to}.
func (d *decoder) ports(raw json.RawMessage) (PortRange, bool) {
	path := []string{"ports"}
	fields, ok := d.object(raw, path, []string{"from", "to"}, "ports")
	if !ok {
		return PortRange{}, false
	}
	n := len(d.diags)
	var r PortRange
	for _, k := range []string{"from", "to"} {
		v, ok := fields[k]
		if !ok || isNull(v) {
			d.errorAt([]string{"ports", k}, "Missing required argument", "ports needs %q.", k)
			continue
		}
		port, ok := d.integer(v, []string{"ports", k})
		if !ok {
			continue
		}
		if port < 1 || port > 65535 {
			d.errorAt([]string{"ports", k}, "Invalid port", "ports.%s = %d is not a TCP port (1-65535).", k, port)
		}
		if k == "from" {
			r.From = port
		} else {
			r.To = port
		}
	}
	if len(d.diags) > n {
		return PortRange{}, false
	}
	if r.From > r.To {
		d.errorAt([]string{"ports"}, "Invalid port range", "ports.from (%d) is above ports.to (%d).", r.From, r.To)
		return PortRange{}, false
	}
	return r, true
}

// decoder collects diagnostics while decoding JSON properties.
type decoder struct{ diags provider.Diagnostics }

func (d *decoder) errorAt(path []string, summary, detail string, args ...any) {
	d.diags = append(d.diags, provider.Diagnostic{
		Severity: provider.Error, Summary: summary, Detail: fmt.Sprintf(detail, args...), Path: slices.Clone(path),
	})
}

// object decodes a JSON object, reporting keys not in allowed.
func (d *decoder) object(raw json.RawMessage, path, allowed []string, what string) (map[string]json.RawMessage, bool) {
	var fields map[string]json.RawMessage
	if kind := jsonKind(raw); kind != "object" || json.Unmarshal(raw, &fields) != nil {
		if kind == "object" {
			kind = "invalid JSON"
		}
		d.errorAt(path, "Invalid properties", "%s must be an object, got %s.", upperFirst(what), kind)
		return nil, false
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(allowed, k) {
			d.errorAt(append(slices.Clip(path), k), "Unsupported argument",
				"An argument named %q is not expected here; %s takes %s.", k, what, quoteAll(allowed))
		}
	}
	return fields, true
}

func (d *decoder) str(raw json.RawMessage, path []string) (string, bool) {
	var s string
	if jsonKind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		d.errorAt(path, "Incorrect attribute value type", "%s must be a string, got %s.", strings.Join(path, "."), jsonKind(raw))
		return "", false
	}
	return s, true
}

func (d *decoder) integer(raw json.RawMessage, path []string) (int, bool) {
	var f float64
	if jsonKind(raw) != "number" || json.Unmarshal(raw, &f) != nil || f != float64(int(f)) {
		d.errorAt(path, "Incorrect attribute value type", "%s must be a whole number, got %s.", strings.Join(path, "."), describeJSON(raw))
		return 0, false
	}
	return int(f), true
}

func (d *decoder) strList(raw json.RawMessage, path []string) []string {
	var elems []json.RawMessage
	if jsonKind(raw) != "list" || json.Unmarshal(raw, &elems) != nil {
		d.errorAt(path, "Incorrect attribute value type", "%s must be a list of strings, got %s.", strings.Join(path, "."), jsonKind(raw))
		return nil
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		if s, ok := d.str(e, append(slices.Clip(path), strconv.Itoa(i))); ok {
			out = append(out, s)
		}
	}
	return out
}

func (d *decoder) strMap(raw json.RawMessage, path []string) map[string]string {
	var fields map[string]json.RawMessage
	if jsonKind(raw) != "object" || json.Unmarshal(raw, &fields) != nil {
		d.errorAt(path, "Incorrect attribute value type", "%s must be a map of strings, got %s.", strings.Join(path, "."), jsonKind(raw))
		return nil
	}
	out := make(map[string]string, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if s, ok := d.str(fields[k], append(slices.Clip(path), k)); ok {
			out[k] = s
		}
	}
	return out
}

func quoteAll(ss []string) string {
	q := make([]string, len(ss))
	for i, s := range ss {
		q[i] = strconv.Quote(s)
	}
	return strings.Join(q, ", ")
}

func upperFirst(s string) string {
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:]
}

func isNull(raw json.RawMessage) bool {
	k := jsonKind(raw)
	return k == "nothing" || k == "null"
}

// describeJSON is a value's kind, or the number itself, for error details.
func describeJSON(raw json.RawMessage) string {
	if k := jsonKind(raw); k != "number" {
		return k
	}
	return strings.TrimSpace(string(raw))
}

// jsonKind names the kind of a JSON value in HCL's words, for error details.
func jsonKind(raw json.RawMessage) string {
	t := strings.TrimLeft(string(raw), " \t\r\n")
	if t == "" {
		return "nothing"
	}
	switch t[0] {
	case '{':
		return "object"
	case '[':
		return "list"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	case 'n':
		return "null"
	default:
		return "number"
	}
}
