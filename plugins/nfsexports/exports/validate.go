package exports

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"path"
	"regexp"
	"strconv"
	"strings"
	"unicode"

	"github.com/infrakit/infrakit/sdk/properties"
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

// propertyKeys are the attributes of an export's properties.
var propertyKeys = []string{"host", "volume", "options"}

// ParseProperties reads and checks a properties object. With require, host
// and volume must be present (Validate); without, they may come from the
// authorization's own fields (Authorize). Problems come back as
// provider.Diagnostics at the attribute's path.
func ParseProperties(raw json.RawMessage, require bool) (Properties, error) {
	var p Properties
	if properties.IsNull(raw) {
		raw = json.RawMessage("{}")
	}
	var d properties.Decoder
	fields, ok := d.Object(raw, nil, propertyKeys, "an export's properties")
	if !ok {
		return p, d.Err()
	}
	for _, a := range []struct {
		key, missing string
		dst          *string
	}{
		{"host", "the NFS client to authorize (an address, network or host name)", &p.Host},
		{"volume", "the absolute path of the exported directory", &p.Volume},
	} {
		// Present means present, even as null: a null host or volume is
		// refused, not taken from the authorization.
		v, ok := fields[a.key]
		if !ok {
			if require {
				d.Errorf([]string{a.key}, "Missing "+a.key, "%s", a.missing)
			}
			continue
		}
		if s, ok := d.String(v, []string{a.key}); ok {
			*a.dst = s
			checkTarget(&d, a.key, s)
		}
	}
	if v, ok := fields["options"]; ok {
		var typed bool
		if p.Options, typed = decodeOptions(&d, v); typed {
			checkOptions(&d, p.Options, []string{"options"})
		}
	}
	return p, d.Err()
}

// decodeOptions decodes options: a list of strings, or one string (one
// element, which may hold several comma-separated options). ok is false
// when an element is not a string: the indexes of the options returned no
// longer match the list's, so they are not checked further.
func decodeOptions(d *properties.Decoder, raw json.RawMessage) (opts []string, ok bool) {
	path := []string{"options"}
	if properties.Kind(raw) == "string" {
		s, ok := d.String(raw, path)
		return []string{s}, ok
	}
	n := len(d.Diags)
	opts = d.StringList(raw, path)
	return opts, len(d.Diags) == n
}

// checkTarget reports an invalid host or volume (key) at its attribute.
func checkTarget(d *properties.Decoder, key, value string) {
	check, summary := CheckHost, "Invalid host"
	if key == "volume" {
		check, summary = CheckVolume, "Invalid volume"
	}
	if err := check(value); err != nil {
		d.Errorf([]string{key}, summary, "%s", err)
	}
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
	var d properties.Decoder
	checkOptions(&d, opts, []string{path})
	return d.Diags
}

// checkOptions is CheckOptions reporting to d.
func checkOptions(d *properties.Decoder, opts []string, path []string) {
	seen := map[string]bool{} // option names so far
	for i, elem := range opts {
		at := properties.Append(path, strconv.Itoa(i))
		if strings.TrimSpace(elem) == "" {
			d.Errorf(at, "Empty option", "remove it")
			continue
		}
		for o := range strings.SplitSeq(elem, ",") {
			name, err := checkOption(o)
			if err != nil {
				d.Errorf(at, "Invalid option", "%s", err)
				continue
			}
			if other, ok := opposite[name]; ok {
				if _, dup := seen[other]; dup {
					d.Errorf(at, "Conflicting options", "%s and %s contradict each other", other, name)
				}
			}
			seen[name] = true
		}
	}
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
