// Package properties decodes a provider's JSON-encoded properties into Go
// values while collecting diagnostics that carry the attribute path, so that
// `infrakit validate` can underline the exact attribute in the user's file.
//
// Properties reach a provider as JSON (the host encodes the cty value of the
// HCL attribute), so a provider's Parse is a walk over json.RawMessage
// values. A Decoder keeps going after an error, so one Validate reports every
// wrong attribute at once, the way Terraform users expect.
package properties

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

// Decoder collects the diagnostics of one decoding walk. The zero value is
// ready to use.
type Decoder struct {
	Diags provider.Diagnostics
}

// Errorf records an error diagnostic at path; detail is a format string.
func (d *Decoder) Errorf(path []string, summary, detail string, args ...any) {
	d.Diags = append(d.Diags, provider.Diagnostic{
		Severity: provider.Error, Summary: summary, Detail: fmt.Sprintf(detail, args...), Path: slices.Clone(path),
	})
}

// Err is the collected diagnostics as an error, or nil when none is an error.
func (d *Decoder) Err() error { return d.Diags.Err() }

// Fields are the attributes of a decoded object.
type Fields map[string]json.RawMessage

// Get returns the attribute named key when it is set to something other
// than null: HCL's optional attributes arrive absent or null alike.
func (f Fields) Get(key string) (json.RawMessage, bool) {
	v, ok := f[key]
	if !ok || IsNull(v) {
		return nil, false
	}
	return v, true
}

// Object decodes a JSON object at path, reporting every key not in allowed.
// what names the object in the detail ("the process instance's properties").
func (d *Decoder) Object(raw json.RawMessage, path, allowed []string, what string) (Fields, bool) {
	var fields Fields
	if kind := Kind(raw); kind != "object" || json.Unmarshal(raw, &fields) != nil {
		if kind == "object" {
			kind = "invalid JSON"
		}
		d.Errorf(path, "Invalid properties", "%s must be an object, got %s.", upperFirst(what), kind)
		return nil, false
	}
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if !slices.Contains(allowed, k) {
			d.Errorf(Append(path, k), "Unsupported argument",
				"An argument named %q is not expected in %s. The arguments expected there are %s.", k, what, QuoteAll(allowed))
		}
	}
	return fields, true
}

// String decodes a string.
func (d *Decoder) String(raw json.RawMessage, path []string) (string, bool) {
	var s string
	if Kind(raw) != "string" || json.Unmarshal(raw, &s) != nil {
		d.Errorf(path, "Incorrect attribute value type", "%s must be a string, got %s.", strings.Join(path, "."), Kind(raw))
		return "", false
	}
	return s, true
}

// Bool decodes true or false.
func (d *Decoder) Bool(raw json.RawMessage, path []string) (bool, bool) {
	var b bool
	if Kind(raw) != "bool" || json.Unmarshal(raw, &b) != nil {
		d.Errorf(path, "Incorrect attribute value type", "%s must be true or false, got %s.", strings.Join(path, "."), Kind(raw))
		return false, false
	}
	return b, true
}

// Number decodes any number.
func (d *Decoder) Number(raw json.RawMessage, path []string) (float64, bool) {
	var f float64
	if Kind(raw) != "number" || json.Unmarshal(raw, &f) != nil {
		d.Errorf(path, "Incorrect attribute value type", "%s must be a number, got %s.", strings.Join(path, "."), Kind(raw))
		return 0, false
	}
	return f, true
}

// Int decodes a whole number; 1.5 is refused with the number in the detail.
func (d *Decoder) Int(raw json.RawMessage, path []string) (int, bool) {
	var f float64
	if Kind(raw) != "number" || json.Unmarshal(raw, &f) != nil || f != float64(int(f)) {
		d.Errorf(path, "Incorrect attribute value type", "%s must be a whole number, got %s.", strings.Join(path, "."), Describe(raw))
		return 0, false
	}
	return int(f), true
}

// Duration decodes a string such as "5s" or "500ms"; negative durations are
// refused.
func (d *Decoder) Duration(raw json.RawMessage, path []string) (time.Duration, bool) {
	s, ok := d.String(raw, path)
	if !ok {
		return 0, false
	}
	name := strings.Join(path, ".")
	dur, err := time.ParseDuration(s)
	switch {
	case err != nil:
		d.Errorf(path, "Invalid duration", "%s %q is not a duration such as \"5s\" or \"500ms\".", name, s)
		return 0, false
	case dur < 0:
		d.Errorf(path, "Invalid duration", "%s must not be negative.", name)
		return 0, false
	}
	return dur, true
}

// StringList decodes a list of strings; wrong elements are reported at their
// index and left out.
func (d *Decoder) StringList(raw json.RawMessage, path []string) []string {
	var elems []json.RawMessage
	if Kind(raw) != "list" || json.Unmarshal(raw, &elems) != nil {
		d.Errorf(path, "Incorrect attribute value type", "%s must be a list of strings, got %s.", strings.Join(path, "."), Kind(raw))
		return nil
	}
	out := make([]string, 0, len(elems))
	for i, e := range elems {
		if s, ok := d.String(e, Append(path, strconv.Itoa(i))); ok {
			out = append(out, s)
		}
	}
	return out
}

// StringMap decodes a map of strings; wrong values are reported at their key
// and left out.
func (d *Decoder) StringMap(raw json.RawMessage, path []string) map[string]string {
	var fields map[string]json.RawMessage
	if Kind(raw) != "object" || json.Unmarshal(raw, &fields) != nil {
		d.Errorf(path, "Incorrect attribute value type", "%s must be a map of strings, got %s.", strings.Join(path, "."), Kind(raw))
		return nil
	}
	out := make(map[string]string, len(fields))
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		if s, ok := d.String(fields[k], Append(path, k)); ok {
			out[k] = s
		}
	}
	return out
}

// Environment decodes a map of environment variables for a program the
// provider starts: names that cannot be variables are refused, and so are
// the reserved names the provider sets itself (setBy says who, as in "the
// process provider for each instance").
func (d *Decoder) Environment(raw json.RawMessage, path, reserved []string, setBy string) map[string]string {
	env := d.StringMap(raw, path)
	for _, k := range slices.Sorted(maps.Keys(env)) {
		switch {
		case k == "" || strings.ContainsAny(k, "=\x00"):
			d.Errorf(Append(path, k), "Invalid environment variable name", "%q cannot be an environment variable name.", k)
		case slices.Contains(reserved, k):
			d.Errorf(Append(path, k), "Reserved environment variable", "%s is set by %s.", k, setBy)
		}
	}
	return env
}

// Append returns path extended by elems without sharing path's backing
// array, so sibling paths built from one parent never overwrite each other.
func Append(path []string, elems ...string) []string {
	return append(slices.Clip(path), elems...)
}

// IsNull reports whether raw is absent or JSON null.
func IsNull(raw json.RawMessage) bool {
	k := Kind(raw)
	return k == "nothing" || k == "null"
}

// Describe is a value's kind, or the number itself, for error details.
func Describe(raw json.RawMessage) string {
	if k := Kind(raw); k != "number" {
		return k
	}
	return strings.TrimSpace(string(raw))
}

// Kind names the kind of a JSON value in HCL's words (object, list, string,
// bool, null, number; "nothing" when raw is empty), for error details.
func Kind(raw json.RawMessage) string {
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

// QuoteAll quotes each name and joins them with commas, for "takes ..." details.
func QuoteAll(names []string) string {
	q := make([]string, len(names))
	for i, s := range names {
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
