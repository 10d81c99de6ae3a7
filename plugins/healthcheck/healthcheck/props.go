package healthcheck

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

// Defaults of the flavor's properties.
const (
	DefaultPath               = "/"
	DefaultExpectStatus       = 200
	DefaultTimeout            = time.Second
	DefaultHealthyThreshold   = 1
	DefaultUnhealthyThreshold = 2
)

// Properties are the decoded flavor properties.
type Properties struct {
	// HTTP is the HTTP check; nil means a TCP connect check.
	HTTP *HTTPCheck
	// Port, when not 0, is probed instead of the port of the instance's
	// address (a separate health port), or supplies one the address lacks.
	Port    int
	Timeout time.Duration
	Thresholds
}

// HTTPCheck is a GET of Path that passes when it answers ExpectStatus.
type HTTPCheck struct {
	Path         string
	ExpectStatus int
}

// Thresholds are how many consecutive probes must agree before the verdict
// changes.
type Thresholds struct {
	Healthy   int
	Unhealthy int
}

// Schema is the schema of the flavor's properties.
func Schema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"tcp": {Type: "bool",
			Description: "Probe by opening a TCP connection to the instance's address. The default when http is not set."},
		"http": {Type: "object({path=optional(string), expect_status=optional(number)})",
			Description: fmt.Sprintf("Probe with an HTTP GET of path (default %q) that must answer expect_status (default %d); redirects are not followed.", DefaultPath, DefaultExpectStatus)},
		"port": {Type: "number",
			Description: "Probe this port on the instance's host instead of the port of its address."},
		"timeout": {Type: "string",
			Description: fmt.Sprintf("How long one probe may take (a Go duration); default %s.", DefaultTimeout)},
		"healthy_threshold": {Type: "number",
			Description: fmt.Sprintf("Consecutive successful probes before an instance is healthy; default %d.", DefaultHealthyThreshold)},
		"unhealthy_threshold": {Type: "number",
			Description: fmt.Sprintf("Consecutive failed probes before an instance is unhealthy; default %d.", DefaultUnhealthyThreshold)},
	}}
}

var (
	topKeys  = []string{"tcp", "http", "port", "timeout", "healthy_threshold", "unhealthy_threshold"}
	httpKeys = []string{"path", "expect_status"}
)

// Parse decodes and checks the properties. Absent properties (empty or
// null) are a TCP check with the defaults. A non-nil error is
// provider.Diagnostics with one diagnostic per problem, each at the path of
// the offending attribute (["http", "path"], ["timeout"]).
func Parse(raw json.RawMessage) (Properties, error) {
	p := Properties{
		Timeout:    DefaultTimeout,
		Thresholds: Thresholds{Healthy: DefaultHealthyThreshold, Unhealthy: DefaultUnhealthyThreshold},
	}
	if isNull(raw) {
		return p, nil
	}
	var d decoder
	fields, ok := d.object(raw, nil, topKeys, "the healthcheck flavor's properties")
	if !ok {
		return Properties{}, d.diags
	}
	tcp, tcpSet := true, false
	if v, ok := fields["tcp"]; ok && !isNull(v) {
		tcp, tcpSet = d.boolean(v, []string{"tcp"})
	}
	if v, ok := fields["http"]; ok && !isNull(v) {
		p.HTTP = d.http(v)
		if tcpSet && tcp {
			d.errorAt([]string{"tcp"}, "Conflicting checks", "Set either tcp = true or an http check, not both.")
		}
	} else if tcpSet && !tcp {
		d.errorAt([]string{"tcp"}, "No check", "tcp = false needs an http check instead; without either there is nothing to probe.")
	}
	if v, ok := fields["port"]; ok && !isNull(v) {
		if port, ok := d.integer(v, []string{"port"}); ok {
			if port < 1 || port > 65535 {
				d.errorAt([]string{"port"}, "Invalid port", "port = %d is not a TCP port (1-65535).", port)
			}
			p.Port = port
		}
	}
	if v, ok := fields["timeout"]; ok && !isNull(v) {
		if s, ok := d.str(v, []string{"timeout"}); ok {
			dur, err := time.ParseDuration(s)
			switch {
			case err != nil:
				d.errorAt([]string{"timeout"}, "Invalid duration", "timeout %q is not a duration such as \"1s\" or \"500ms\".", s)
			case dur <= 0:
				d.errorAt([]string{"timeout"}, "Invalid duration", "timeout must be positive.")
			default:
				p.Timeout = dur
			}
		}
	}
	for _, th := range []struct {
		key string
		dst *int
	}{{"healthy_threshold", &p.Healthy}, {"unhealthy_threshold", &p.Unhealthy}} {
		v, ok := fields[th.key]
		if !ok || isNull(v) {
			continue
		}
		if n, ok := d.integer(v, []string{th.key}); ok {
			if n < 1 {
				d.errorAt([]string{th.key}, "Invalid threshold", "%s must be at least 1, got %d.", th.key, n)
			}
			*th.dst = n
		}
	}
	if err := d.diags.Err(); err != nil {
		return Properties{}, err
	}
	return p, nil
}

// http decodes the http check.
func (d *decoder) http(raw json.RawMessage) *HTTPCheck {
	c := &HTTPCheck{Path: DefaultPath, ExpectStatus: DefaultExpectStatus}
	fields, ok := d.object(raw, []string{"http"}, httpKeys, "http")
	if !ok {
		return c
	}
	if v, ok := fields["path"]; ok && !isNull(v) {
		if s, ok := d.str(v, []string{"http", "path"}); ok {
			if !strings.HasPrefix(s, "/") {
				d.errorAt([]string{"http", "path"}, "Invalid path", "http.path %q must start with \"/\".", s)
			}
			c.Path = s
		}
	}
	if v, ok := fields["expect_status"]; ok && !isNull(v) {
		if n, ok := d.integer(v, []string{"http", "expect_status"}); ok {
			if n < 100 || n > 599 {
				d.errorAt([]string{"http", "expect_status"}, "Invalid status", "http.expect_status = %d is not an HTTP status (100-599).", n)
			}
			c.ExpectStatus = n
		}
	}
	return c
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

func (d *decoder) boolean(raw json.RawMessage, path []string) (bool, bool) {
	var b bool
	if jsonKind(raw) != "bool" || json.Unmarshal(raw, &b) != nil {
		d.errorAt(path, "Incorrect attribute value type", "%s must be true or false, got %s.", strings.Join(path, "."), jsonKind(raw))
		return false, false
	}
	return b, true
}

func (d *decoder) integer(raw json.RawMessage, path []string) (int, bool) {
	var f float64
	if jsonKind(raw) != "number" || json.Unmarshal(raw, &f) != nil || f != float64(int(f)) {
		what := jsonKind(raw)
		if what == "number" {
			what = strings.TrimSpace(string(raw))
		}
		d.errorAt(path, "Incorrect attribute value type", "%s must be a whole number, got %s.", strings.Join(path, "."), what)
		return 0, false
	}
	return int(f), true
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
