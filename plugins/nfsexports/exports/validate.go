package exports

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/infrakit/infrakit/sdk/provider"
)

// Properties are an authorization's properties: who (host) may mount what
// (volume) how (options).
type Properties struct {
	Host   string
	Volume string
	// Options as written: a list, or one comma-separated string (one
	// element here); each element may hold several comma-separated options.
	Options []string
}

// Schema is the properties schema of the "exports" type.
func Schema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"host": {Type: "string", Required: true,
			Description: "the NFS client: an IP address, a CIDR network (10.0.0.0/24), a host name (wildcards * and ? allowed), @netgroup or *"},
		"volume": {Type: "string", Required: true,
			Description: "the exported directory: an absolute, clean path without spaces"},
		"options": {Type: "list(string)",
			Description: "export options (rw, ro, sync, no_subtree_check, root_squash, anonuid=N, ...); default rw, sync, no_subtree_check"},
	}}
}

// ParseProperties reads and checks a properties object. With require, host
// and volume must be present (Validate); without, they may come from the
// authorization's own fields (Authorize). Problems come back as
// provider.Diagnostics at the attribute's path.
func ParseProperties(raw json.RawMessage, require bool) (Properties, error) {
	var p Properties
	if len(bytes.TrimSpace(raw)) == 0 || bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		raw = json.RawMessage("{}")
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return p, provider.AttributeError("Properties must be an object", fmt.Sprintf("got %s", shorten(raw)))
	}
	var ds provider.Diagnostics
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := obj[k]
		switch k {
		case "host", "volume":
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				ds = append(ds, diag("Invalid "+k, fmt.Sprintf("want a string, got %s", shorten(v)), k))
				continue
			}
			if k == "host" {
				p.Host = s
				if err := CheckHost(s); err != nil {
					ds = append(ds, diag("Invalid host", err.Error(), k))
				}
			} else {
				p.Volume = s
				if err := CheckVolume(s); err != nil {
					ds = append(ds, diag("Invalid volume", err.Error(), k))
				}
			}
		case "options":
			var one string
			if json.Unmarshal(v, &one) == nil {
				p.Options = []string{one}
			} else {
				var raws []json.RawMessage
				if err := json.Unmarshal(v, &raws); err != nil {
					ds = append(ds, diag("Invalid options", fmt.Sprintf("want a list of strings, got %s", shorten(v)), k))
					continue
				}
				typed := true
				for i, r := range raws {
					var s string
					if err := json.Unmarshal(r, &s); err != nil {
						ds = append(ds, diag("Invalid option", fmt.Sprintf("want a string, got %s", shorten(r)), k, strconv.Itoa(i)))
						typed = false
						continue
					}
					p.Options = append(p.Options, s)
				}
				if !typed {
					continue // indexes of p.Options no longer match the list's
				}
			}
			ds = append(ds, CheckOptions(p.Options, "options")...)
		default:
			ds = append(ds, diag("Unsupported attribute", fmt.Sprintf("%q is not a property of an export; want host, volume and options", k), k))
		}
	}
	if require {
		if _, ok := obj["host"]; !ok {
			ds = append(ds, diag("Missing host", "the NFS client to authorize (an address, network or host name)", "host"))
		}
		if _, ok := obj["volume"]; !ok {
			ds = append(ds, diag("Missing volume", "the absolute path of the exported directory", "volume"))
		}
	}
	return p, ds.Err()
}

func diag(summary, detail string, path ...string) provider.Diagnostic {
	return provider.Diagnostic{Severity: provider.Error, Summary: summary, Detail: detail, Path: path}
}

func shorten(b []byte) string {
	s := string(bytes.TrimSpace(b))
	if len(s) > 60 {
		s = s[:57] + "..."
	}
	return s
}

var (
	netgroupRE = regexp.MustCompile(`^@[A-Za-z0-9_.-]+$`)
	// A host name label, with the wildcards exports(5) allows.
	labelRE = regexp.MustCompile(`^[A-Za-z0-9_*?]([A-Za-z0-9_*?-]*[A-Za-z0-9_*?])?$`)
)

// ExportHost is the client as the export line names it: h without the
// port an instance's address may carry ("10.0.0.7:8080" → "10.0.0.7",
// "[2001:db8::7]:22" → "2001:db8::7"), so `host = member.address` works.
func ExportHost(h string) string {
	if _, err := netip.ParseAddr(h); err == nil {
		return h // a bare IPv6 address has colons but no port
	}
	if host, port, err := net.SplitHostPort(h); err == nil && host != "" {
		if n, err := strconv.Atoi(port); err == nil && n >= 1 && n <= 65535 {
			return host
		}
	}
	return h
}

// CheckHost accepts what exports(5) takes as a client and nothing that
// could break the line: an IPv4 or IPv6 address, a network (10.0.0.0/24 or
// 10.0.0.0/255.255.255.0), a host name with optional * and ? wildcards,
// @netgroup, or * for everyone; any of them with a port, which ExportHost
// drops.
func CheckHost(h string) error {
	if x := ExportHost(h); x != h {
		if err := checkHost(x); err != nil {
			return fmt.Errorf("%q: %w", h, err)
		}
		return nil
	}
	return checkHost(h)
}

func checkHost(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("empty; want an address, network or host name")
	case strings.IndexFunc(h, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("%q has spaces or control characters", h)
	case strings.ContainsAny(h, `()",#\'`):
		return fmt.Errorf("%q has parentheses, quotes, commas, '#' or '\\'; options go in options", h)
	case len(h) > 253:
		return fmt.Errorf("%q is longer than a host name may be", h)
	case h == "*":
		return nil
	case strings.HasPrefix(h, "@"):
		if !netgroupRE.MatchString(h) {
			return fmt.Errorf("%q is not a netgroup name", h)
		}
		return nil
	}
	if _, err := netip.ParseAddr(h); err == nil {
		return nil
	}
	if addr, mask, ok := strings.Cut(h, "/"); ok {
		if _, err := netip.ParsePrefix(h); err == nil {
			return nil
		}
		a, err1 := netip.ParseAddr(addr)
		m, err2 := netip.ParseAddr(mask)
		if err1 == nil && err2 == nil && a.Is4() && m.Is4() && validMask(m) {
			return nil
		}
		return fmt.Errorf("%q is not a network (want 10.0.0.0/24 or 10.0.0.0/255.255.255.0)", h)
	}
	if strings.Contains(h, ":") {
		return fmt.Errorf("%q is not an IPv6 address", h)
	}
	for label := range strings.SplitSeq(strings.TrimSuffix(h, "."), ".") {
		if len(label) > 63 || !labelRE.MatchString(label) {
			return fmt.Errorf("%q is not a host name (label %q)", h, label)
		}
	}
	return nil
}

// validMask: ones then zeros.
func validMask(m netip.Addr) bool {
	b := m.As4()
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	return v != 0 && (^v)&(^v+1) == 0
}

// CheckVolume accepts an absolute, clean path without whitespace, quotes or
// control characters (which would need exports(5) quoting).
func CheckVolume(v string) error {
	switch {
	case v == "":
		return fmt.Errorf("empty; want an absolute path")
	case !strings.HasPrefix(v, "/"):
		return fmt.Errorf("%q is not an absolute path", v)
	case strings.IndexFunc(v, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0:
		return fmt.Errorf("%q has spaces or control characters", v)
	case strings.ContainsAny(v, `"'\#`):
		return fmt.Errorf("%q has quotes, '\\' or '#'", v)
	case path.Clean(v) != v:
		return fmt.Errorf("%q is not a clean path; write %q", v, path.Clean(v))
	}
	return nil
}

// flags are the exports(5) options without a value.
var flags = map[string]bool{
	"rw": true, "ro": true, "sync": true, "async": true,
	"secure": true, "insecure": true, "wdelay": true, "no_wdelay": true,
	"hide": true, "nohide": true, "crossmnt": true,
	"subtree_check": true, "no_subtree_check": true,
	"secure_locks": true, "insecure_locks": true, "auth_nlm": true, "no_auth_nlm": true,
	"root_squash": true, "no_root_squash": true, "all_squash": true, "no_all_squash": true,
	"no_acl": true, "pnfs": true, "no_pnfs": true, "security_label": true,
	"mp": true, "mountpoint": true,
}

// opposite maps each option to the one that contradicts it, both ways.
var opposite = func() map[string]string {
	m := map[string]string{}
	for a, b := range map[string]string{
		"rw": "ro", "sync": "async", "secure": "insecure", "wdelay": "no_wdelay",
		"hide": "nohide", "subtree_check": "no_subtree_check", "secure_locks": "insecure_locks",
		"auth_nlm": "no_auth_nlm", "root_squash": "no_root_squash", "all_squash": "no_all_squash",
		"pnfs": "no_pnfs",
	} {
		m[a], m[b] = b, a
	}
	return m
}()

var secFlavors = map[string]bool{"sys": true, "krb5": true, "krb5i": true, "krb5p": true, "none": true}

// CheckOptions checks export options; each element may hold several
// comma-separated ones. Diagnostics point at path and the element's index.
func CheckOptions(opts []string, path string) provider.Diagnostics {
	var ds provider.Diagnostics
	seen := map[string]bool{} // option names so far
	for i, elem := range opts {
		at := []string{path, strconv.Itoa(i)}
		if strings.TrimSpace(elem) == "" {
			ds = append(ds, diag("Empty option", "remove it", at...))
			continue
		}
		for o := range strings.SplitSeq(elem, ",") {
			name, err := checkOption(o)
			if err != nil {
				ds = append(ds, diag("Invalid option", err.Error(), at...))
				continue
			}
			if other, ok := opposite[name]; ok {
				if _, dup := seen[other]; dup {
					ds = append(ds, diag("Conflicting options", fmt.Sprintf("%s and %s contradict each other", other, name), at...))
				}
			}
			seen[name] = true
		}
	}
	return ds
}

var (
	uintRE = regexp.MustCompile(`^[0-9]{1,10}$`)
	uuidRE = regexp.MustCompile(`^[0-9A-Fa-f-]{8,40}$`)
)

// checkOption checks one option and returns its name.
func checkOption(o string) (string, error) {
	if o == "" {
		return "", fmt.Errorf("empty option (two commas in a row?)")
	}
	if strings.IndexFunc(o, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) }) >= 0 ||
		strings.ContainsAny(o, `()"'#\`) {
		return "", fmt.Errorf("%q has spaces, parentheses, quotes or '#'", o)
	}
	name, val, hasVal := strings.Cut(o, "=")
	if flags[name] {
		if hasVal && name != "mp" && name != "mountpoint" {
			return "", fmt.Errorf("%q takes no value", name)
		}
		if hasVal && CheckVolume(val) != nil {
			return "", fmt.Errorf("%s=%q: want an absolute path", name, val)
		}
		return name, nil
	}
	switch name {
	case "anonuid", "anongid":
		if !hasVal || !uintRE.MatchString(val) {
			return "", fmt.Errorf("%s needs a number: %s=65534", name, name)
		}
	case "fsid":
		if !hasVal || !(val == "root" || uintRE.MatchString(val) || uuidRE.MatchString(val)) {
			return "", fmt.Errorf("fsid needs a number, root or a UUID: fsid=1")
		}
	case "sec":
		if !hasVal {
			return "", fmt.Errorf("sec needs flavors: sec=sys or sec=krb5:krb5p")
		}
		for f := range strings.SplitSeq(val, ":") {
			if !secFlavors[f] {
				return "", fmt.Errorf("sec flavor %q: want sys, krb5, krb5i, krb5p or none", f)
			}
		}
	default:
		return "", fmt.Errorf("%q is not an export option (see exports(5)): want rw, ro, sync, async, no_subtree_check, root_squash, no_root_squash, all_squash, insecure, secure, anonuid=N, fsid=N, sec=..., ...", o)
	}
	return name, nil
}
