package filesd

import (
	"encoding/json"
	"maps"
	"net"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/infrakit/infrakit/sdk/properties"
	"github.com/infrakit/infrakit/sdk/provider"
)

// Properties are an enrollment target's properties for one member: which
// file lists it, where it is scraped, and with what labels.
type Properties struct {
	// File is the file_sd file, as written (relative paths are taken from
	// the provider's working directory, the stack's).
	File string
	// Address is the target, host:port.
	Address string
	// Labels are added to every series scraped from the target.
	Labels map[string]string
}

var propertyKeys = []string{"file", "address", "labels"}

// Schema is the properties schema of the "file_sd" type.
func Schema() provider.Schema {
	return provider.Schema{Attributes: map[string]provider.Attribute{
		"file": {Type: "string", Required: true,
			Description: "the file_sd file that lists the members (*.json), relative to the stack's directory or absolute; name it in Prometheus's file_sd_configs"},
		"address": {Type: "string", Required: true,
			Description: "where Prometheus scrapes the member, host:port (member.address)"},
		"labels": {Type: "map(string)",
			Description: `labels of the member's series, such as { infrakit_stack = member.tags["infrakit.stack"], infrakit_group = member.tags["infrakit.group"] }; infrakit_instance is set from the member`},
	}}
}

// ParseProperties reads and checks a properties object; problems come
// back as provider.Diagnostics at the attribute's path, all at once.
func ParseProperties(raw json.RawMessage) (Properties, error) {
	var p Properties
	if properties.IsNull(raw) {
		raw = json.RawMessage("{}")
	}
	var d properties.Decoder
	fields, ok := d.Object(raw, nil, propertyKeys, "a file_sd target's properties")
	if !ok {
		return p, d.Err()
	}
	if v, ok := fields.Get("file"); !ok {
		d.Errorf([]string{"file"}, "Missing file", `the file_sd file to list the member in, such as "prometheus/web.json"`)
	} else if s, ok := d.String(v, []string{"file"}); ok {
		p.File = s
		checkFile(&d, s)
	}
	if v, ok := fields.Get("address"); !ok {
		d.Errorf([]string{"address"}, "Missing address", "where Prometheus scrapes the member, host:port: address = member.address")
	} else if s, ok := d.String(v, []string{"address"}); ok {
		p.Address = s
		checkAddress(&d, s)
	}
	if v, ok := fields.Get("labels"); ok {
		p.Labels = d.StringMap(v, []string{"labels"})
		for _, k := range slices.Sorted(maps.Keys(p.Labels)) {
			checkLabel(&d, k, p.Labels[k])
		}
	}
	return p, d.Err()
}

// checkFile accepts a path ending in .json: Prometheus reads a file_sd file
// by its extension, and the provider writes JSON.
func checkFile(d *properties.Decoder, f string) {
	path := []string{"file"}
	switch {
	case strings.TrimSpace(f) == "":
		d.Errorf(path, "Invalid file", "file names no file.")
	case strings.ContainsRune(f, 0):
		d.Errorf(path, "Invalid file", "%q holds a NUL character.", f)
	case filepath.Ext(f) != ".json":
		d.Errorf(path, "Invalid file", "%q does not end in .json: Prometheus reads a file_sd file by its extension, and this provider writes JSON.", f)
	case strings.HasSuffix(f, "/") || filepath.Base(filepath.Clean(f)) == ".json":
		d.Errorf(path, "Invalid file", "%q names a directory, not a file.", f)
	}
}

// checkAddress accepts host:port, as Prometheus's __address__ takes it.
func checkAddress(d *properties.Decoder, a string) {
	path := []string{"address"}
	if a == "" {
		d.Errorf(path, "Invalid address", "the address is empty: the member has none (a simulated instance, say); Prometheus needs host:port")
		return
	}
	if strings.Contains(a, "://") || strings.Contains(a, "/") {
		d.Errorf(path, "Invalid address", "%q is not host:port: write the address without a scheme or path (the scrape job sets those)", a)
		return
	}
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		d.Errorf(path, "Invalid address", "%q is not host:port: %v", a, err)
		return
	}
	n, err := strconv.Atoi(port)
	switch {
	case host == "":
		d.Errorf(path, "Invalid address", "%q names no host", a)
	case strings.ContainsFunc(host, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		d.Errorf(path, "Invalid address", "%q has spaces or control characters", a)
	case err != nil || n < 1 || n > 65535:
		d.Errorf(path, "Invalid address", "%q has no port number (1 to 65535)", a)
	}
}

// labelNameRE is Prometheus's label name syntax.
var labelNameRE = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// checkLabel accepts a label Prometheus keeps on the series: a valid name
// not starting with "__" (those are dropped after relabeling) and not one
// the provider sets.
func checkLabel(d *properties.Decoder, name, value string) {
	path := []string{"labels", name}
	switch {
	case !labelNameRE.MatchString(name):
		d.Errorf(path, "Invalid label name", "%q is not a Prometheus label name: letters, digits and underscores, not starting with a digit (infrakit_group, not infrakit.group).", name)
	case strings.HasPrefix(name, "__"):
		d.Errorf(path, "Reserved label name", "%q starts with __: Prometheus drops such labels after relabeling, so it would never reach a series.", name)
	case name == InstanceLabel || name == LogicalIDLabel:
		d.Errorf(path, "Reserved label name", "%s is set by the provider from the member.", name)
	case !utf8.ValidString(value):
		d.Errorf(path, "Invalid label value", "the value of %s is not UTF-8.", name)
	}
}
