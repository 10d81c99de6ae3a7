package exports

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	"github.com/infrakit/infrakit/sdk/provider"
)

func TestCheckHost(t *testing.T) {
	good := []string{
		"10.0.0.1", "::1", "2001:db8::7", "10.0.0.0/24", "2001:db8::/32", "10.0.0.0/255.255.255.0",
		"web-1", "web-1.example.com", "web-1.example.com.", "*.example.com", "web-?.example.com", "*",
		"@trusted", "compute-0a1b2c3d", "host_with_underscore",
		"10.0.0.7:8080", "[2001:db8::7]:22", "web-1:80", // an instance address with a port
	}
	bad := []string{
		"", "web 1", "web(rw)", "a,b", "web\t1", "#web", `"web"`, "10.0.0.0/33", "10.0.0.0/255.0.255.0",
		"-web", "web-", "web..example.com", "::zz", "@", "@bad group", "a\\b", "é.example.com",
		"10.0.0.7:0", "10.0.0.7:http", "bad_-:80", "[::zz]:22",
	}
	for _, h := range good {
		if err := CheckHost(h); err != nil {
			t.Errorf("CheckHost(%q): %v", h, err)
		}
	}
	for _, h := range bad {
		if err := CheckHost(h); err == nil {
			t.Errorf("CheckHost(%q) accepted", h)
		}
	}
}

func TestExportHost(t *testing.T) {
	for in, want := range map[string]string{
		"10.0.0.7": "10.0.0.7", "10.0.0.7:8080": "10.0.0.7", "::1": "::1", "2001:db8::7": "2001:db8::7",
		"[2001:db8::7]:22": "2001:db8::7", "web-1:80": "web-1", "web-1": "web-1", "10.0.0.0/24": "10.0.0.0/24",
		"10.0.0.7:0": "10.0.0.7:0", "*": "*",
	} {
		if got := ExportHost(in); got != want {
			t.Errorf("ExportHost(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCheckVolume(t *testing.T) {
	for _, v := range []string{"/", "/srv/nfs", "/srv/nfs/vol-1", "/data/a.b_c"} {
		if err := CheckVolume(v); err != nil {
			t.Errorf("CheckVolume(%q): %v", v, err)
		}
	}
	for _, v := range []string{"", "srv/nfs", "./srv", "/srv/nfs/", "/srv//nfs", "/srv/../etc", "/srv/my vol", "/srv/\"x\"", "/srv/#x", "/srv/\x01"} {
		if err := CheckVolume(v); err == nil {
			t.Errorf("CheckVolume(%q) accepted", v)
		}
	}
}

func TestCheckOptions(t *testing.T) {
	tests := []struct {
		opts  []string
		paths [][]string // where the errors are; nil: none
	}{
		{[]string{"rw", "sync", "no_subtree_check"}, nil},
		{[]string{"rw,sync,no_subtree_check"}, nil},
		{[]string{"ro", "root_squash", "anonuid=65534", "anongid=65534", "fsid=1", "sec=krb5:krb5p", "insecure", "all_squash", "mp=/srv"}, nil},
		{[]string{"fsid=root"}, nil},
		{[]string{"rw", "bogus"}, [][]string{{"options", "1"}}},
		{[]string{"rw", "ro"}, [][]string{{"options", "1"}}},
		{[]string{"sync,async"}, [][]string{{"options", "0"}}},
		{[]string{"no_root_squash", "root_squash"}, [][]string{{"options", "1"}}},
		{[]string{"anonuid=nobody"}, [][]string{{"options", "0"}}},
		{[]string{"anonuid"}, [][]string{{"options", "0"}}},
		{[]string{"rw=1"}, [][]string{{"options", "0"}}},
		{[]string{"sec=md5"}, [][]string{{"options", "0"}}},
		{[]string{"rw,,sync"}, [][]string{{"options", "0"}}},
		{[]string{""}, [][]string{{"options", "0"}}},
		{[]string{"rw sync"}, [][]string{{"options", "0"}}},
		{[]string{"rw)"}, [][]string{{"options", "0"}}},
	}
	for _, tt := range tests {
		ds := CheckOptions(tt.opts, "options")
		var paths [][]string
		for _, d := range ds {
			paths = append(paths, d.Path)
		}
		if !slices.EqualFunc(paths, tt.paths, slices.Equal) {
			t.Errorf("CheckOptions(%q): paths %q, want %q (%v)", tt.opts, paths, tt.paths, ds)
		}
	}
}

func TestParseProperties(t *testing.T) {
	p, err := ParseProperties(json.RawMessage(`{"host": "10.0.0.1", "volume": "/srv/nfs", "options": ["rw", "sync"]}`), true)
	if err != nil {
		t.Fatal(err)
	}
	if p.Host != "10.0.0.1" || p.Volume != "/srv/nfs" || !slices.Equal(p.Options, []string{"rw", "sync"}) {
		t.Fatalf("got %+v", p)
	}
	p, err = ParseProperties(json.RawMessage(`{"host": "10.0.0.1", "volume": "/srv/nfs", "options": "rw,sync"}`), true)
	if err != nil || !slices.Equal(p.Options, []string{"rw,sync"}) {
		t.Fatalf("options as one string: %+v %v", p, err)
	}
	if _, err := ParseProperties(nil, false); err != nil {
		t.Fatalf("no properties, not required: %v", err)
	}

	tests := []struct {
		props   string
		require bool
		path    []string
	}{
		{`{"host": "bad host", "volume": "/srv"}`, true, []string{"host"}},
		{`{"host": "web(rw)", "volume": "/srv"}`, true, []string{"host"}},
		{`{"host": 3, "volume": "/srv"}`, true, []string{"host"}},
		{`{"host": "h", "volume": "srv"}`, true, []string{"volume"}},
		{`{"host": "h", "volume": "/srv", "options": ["rw", "bogus"]}`, true, []string{"options", "1"}},
		{`{"host": "h", "volume": "/srv", "options": ["rw", 1]}`, true, []string{"options", "1"}},
		{`{"host": "h", "volume": "/srv", "options": {"rw": true}}`, true, []string{"options"}},
		{`{"host": "h", "volume": "/srv", "iops": 10}`, true, []string{"iops"}},
		{`{"volume": "/srv"}`, true, []string{"host"}},
		{`{"host": "h"}`, true, []string{"volume"}},
		{`{}`, true, []string{"host"}},
		// Present but null is refused, not taken for absent.
		{`{"host": null}`, false, []string{"host"}},
		{`{"host": "h", "volume": "/srv", "options": null}`, true, []string{"options"}},
		{`[1]`, false, nil},
		{`"x"`, false, nil},
	}
	for _, tt := range tests {
		_, err := ParseProperties(json.RawMessage(tt.props), tt.require)
		var ds provider.Diagnostics
		if !errors.As(err, &ds) || !slices.ContainsFunc(ds, func(d provider.Diagnostic) bool { return slices.Equal(d.Path, tt.path) }) {
			t.Errorf("%s: want a diagnostic at %q, got %v", tt.props, tt.path, err)
		}
	}
}
